"""The job manager's workers, as a ``WorkerGroup``: local processes (``WorkerProcesses``, here),
or the tasks of one Spark barrier stage (``spark_workers.SparkWorkers``, with ``--master``);
``launch.worker_group`` chooses.

Local workers are forked from the process's zygote when it has one (``zygote``: started by
``weir run`` before any thread; a worker loads the job file itself, or takes a SQL job's plan
from the zygote, so user functions never need to be pickled), else spawned; one pipe each
(``messages.WorkerLink``), stopped in order or killed all at once for a restart."""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from weir.base.errors import MessageError, WorkerFailed
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.control import zygote
from weir.engine.runtime.messages import Failed, FromWorker, ToWorker, WorkerLink
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.main import worker_main

log = logging.getLogger(__name__)


class Link(Protocol):
    """The job manager's end of its channel to one worker (``messages.WorkerLink``)."""

    def send(self, msg: ToWorker) -> None: ...

    def poll(self, timeout: float = 0.0) -> bool: ...

    def waitable(self) -> Any:
        """What ``multiprocessing.connection.wait`` takes for this channel; None: nothing to
        wait on now (a task not yet connected, or lost)."""
        ...

    def receive(self) -> FromWorker: ...

    def close(self) -> None: ...


class WorkerGroup(Protocol):
    """One attempt's workers, as the job manager starts, follows, stops and kills them."""

    @property
    def links(self) -> Sequence[Link]: ...

    @property
    def auth(self) -> PeerAuth | None:
        """The attempt's secret (it proves the job manager to a task's state server)."""
        ...

    def spawn(self, cfg: RunConfig, facts: RunFacts, job_name: str, attempt: int) -> None: ...

    def alive(self, index: int) -> bool: ...

    def stopped_cleanly(self, index: int) -> bool:
        """The worker exited by itself without an error (stopped from outside, not failed)."""
        ...

    def broadcast(self, msg: ToWorker) -> None: ...

    def join(self, timeout_s: float) -> None: ...

    def kill(self) -> None: ...

    def failure_reason(self, index: int) -> str: ...

    def root_cause(self, failure: WorkerFailed, wait_s: float = 1.0) -> WorkerFailed: ...

    def release(self) -> None:
        """The job has ended: let go of what the group holds (a Spark application)."""
        ...


def send_all(links: Sequence[Link], msg: ToWorker) -> None:
    for link in links:
        try:
            link.send(msg)
        except OSError:
            pass  # a worker that is gone: the job manager notices it on its own


def last_words(link: Link) -> str | None:
    """The reason a worker gave in its ``Failed`` message, if it sent one before it went."""
    try:
        while link.poll(0):
            msg = link.receive()
            if isinstance(msg, Failed):
                return msg.reason
    except (EOFError, OSError, MessageError):
        pass
    return None


def start_deaf_to_ctrl_c(proc: BaseProcess) -> None:
    """Start ``proc`` with SIGINT ignored from its first instruction: a terminal's Ctrl-C
    reaches the whole process group, and a child still importing (before it ignores SIGINT
    itself) would die with a traceback instead of being stopped in order by its parent. An
    ignored signal stays ignored across ``exec`` (a blocked one does not: the spawn unblocks
    it). Only the main thread may change the handler; a restart from another thread starts
    the child as it is."""
    if threading.current_thread() is not threading.main_thread():
        proc.start()
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc.start()
    finally:
        signal.signal(signal.SIGINT, before)


def _start_worker(args: tuple[object, ...], name: str) -> BaseProcess:
    """Fork the worker from the zygote if one runs, else spawn it (deaf to Ctrl-C either way:
    the zygote ignores SIGINT, and its forks inherit that)."""
    if zygote.current() is not None:
        proc: BaseProcess = zygote.ZygoteProcess(
            target=worker_main, args=args, name=name, daemon=True
        )
        try:
            proc.start()
            return proc
        except (OSError, EOFError) as exc:  # it went between the check and the pid's answer
            log.warning("worker=%s: the zygote did not answer (%s); spawning it", name, exc)
    proc = mp.get_context("spawn").Process(target=worker_main, args=args, name=name, daemon=True)
    start_deaf_to_ctrl_c(proc)
    return proc


class WorkerProcesses:
    def __init__(self) -> None:
        self.procs: list[BaseProcess] = []
        self.links: list[WorkerLink] = []
        self.auth: PeerAuth | None = None

    def spawn(self, cfg: RunConfig, facts: RunFacts, job_name: str, attempt: int) -> None:
        """Start ``cfg.parallelism`` workers for ``attempt``, each handed the attempt's new
        exchange secret in its spawn arguments (sent down the private pipe to the child)."""
        auth = self.auth = PeerAuth.new(attempt)
        self.procs, self.links = [], []
        for i in range(cfg.parallelism):
            parent, child = mp.Pipe()
            args = (cfg, facts, i, child, auth)
            proc = _start_worker(args, f"weir-{job_name}-worker-{i}")
            child.close()
            self.procs.append(proc)
            self.links.append(WorkerLink(parent))

    def alive(self, index: int) -> bool:
        return self.procs[index].is_alive()

    def release(self) -> None:
        pass  # the processes have exited

    def stopped_cleanly(self, index: int) -> bool:
        return self.procs[index].exitcode == 0 and self.failure_reason(index).startswith("process")

    def broadcast(self, msg: ToWorker) -> None:
        send_all(self.links, msg)

    def join(self, timeout_s: float) -> None:
        """Wait for every worker to exit; terminate those still running at the deadline."""
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.warning("worker=%s did not stop in time; terminating", proc.name)
                proc.terminate()
                proc.join(2.0)

    def kill(self) -> None:
        """Kill every worker at once (a restart starts them all again)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5.0)
        for link in self.links:
            link.close()

    def failure_reason(self, index: int) -> str:
        """What worker ``index`` said before it exited, else how it exited."""
        proc = self.procs[index]
        said = last_words(self.links[index])
        return said or f"process {proc.pid} exited with code {proc.exitcode}"

    def root_cause(self, failure: WorkerFailed, wait_s: float = 1.0) -> WorkerFailed:
        """A survivor that lost a peer reports first; the peer that died is the cause. Its
        connection closes a moment before its process can be reaped, so wait for it briefly."""
        deadline = time.monotonic() + wait_s
        while True:
            for i, proc in enumerate(self.procs):
                if i != failure.worker and not proc.is_alive() and proc.exitcode not in (0, None):
                    return WorkerFailed(i, self.failure_reason(i))
            if time.monotonic() >= deadline:
                return failure
            time.sleep(0.02)
