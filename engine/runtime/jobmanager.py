"""The job manager: starts the workers, follows their status, notices when one dies.

It runs in the ``weir run`` process beside the API. Workers are spawned (not forked), each loads
the job file itself, so user functions never need to be pickled.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from engine.errors import ConfigError, WorkerFailed
from engine.job import Job
from engine.runtime.chain import sink_nodes
from engine.runtime.config import RunConfig
from engine.runtime.worker import default_side_sink, worker_main
from engine.sinks import Sink
from engine.watermarks import MIN_WATERMARK
from state.keygroups import range_for_operator

log = logging.getLogger(__name__)


class JobManager:
    def __init__(self, cfg: RunConfig, job: Job) -> None:
        if cfg.parallelism > job.max_parallelism:
            raise ConfigError(
                f"--parallelism={cfg.parallelism} exceeds the job's max_parallelism="
                f"{job.max_parallelism} (its number of key groups); use at most that"
            )
        self.cfg = cfg
        self.job = job
        self.parallelism = cfg.parallelism
        self.ranges = [
            range_for_operator(job.max_parallelism, cfg.parallelism, i)
            for i in range(cfg.parallelism)
        ]
        self._procs: list[BaseProcess] = []
        self._conns: list[Connection] = []
        self._status: dict[int, dict[str, Any]] = {}
        self._finished: set[int] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.done = threading.Event()  # set when the job finished or failed
        self.failure: WorkerFailed | None = None
        self.started_at = time.time()
        self._monitor: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start from empty state (no restore yet): earlier local state of this job is removed."""
        job_dir = self.cfg.job_dir(self.job.name)
        for old in job_dir.glob("worker-*"):
            shutil.rmtree(old)
        job_dir.mkdir(parents=True, exist_ok=True)
        for sink in self._sinks():
            sink.prepare()
        ctx = mp.get_context("spawn")
        for i in range(self.parallelism):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=worker_main,
                args=(self.cfg, i, child),
                name=f"weir-{self.job.name}-worker-{i}",
                daemon=True,
            )
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        self._monitor = threading.Thread(target=self._follow, name="weir-jobmanager", daemon=True)
        self._monitor.start()
        log.info("job=%s started workers=%d", self.job.name, self.parallelism)

    def _sinks(self) -> list[Sink]:
        """Every sink the workers will open: results, stream sinks and side outputs."""
        source = self.job.sources[0]
        found: list[Sink] = [s for op in self.job.operators.values() for s in op.sinks]
        found += [n.sink for n in sink_nodes(source)]
        found.append(
            default_side_sink(
                self.cfg, self.job.name, self.cfg.dead_letter_url, "dead-letter.jsonl"
            )
        )
        found.append(
            default_side_sink(self.cfg, self.job.name, self.cfg.late_sink_url, "late.jsonl")
        )
        return found

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        for conn in self._conns:
            try:
                conn.send("stop")
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.warning("worker=%s did not stop in time; terminating", proc.name)
                proc.terminate()
                proc.join(2.0)
        if self._monitor is not None:
            self._monitor.join(2.0)
        self.done.set()

    def _follow(self) -> None:
        while not self._stopping.is_set():
            for i, (proc, conn) in enumerate(zip(self._procs, self._conns, strict=True)):
                try:
                    while conn.poll(0):
                        self._on_message(i, conn.recv())
                except (EOFError, OSError):
                    pass
                if not proc.is_alive() and not self._stopping.is_set():
                    reason = self._failure_reason(i, proc)
                    if proc.exitcode == 0 and reason.startswith("process"):
                        log.info(
                            "job=%s worker=%d was stopped from outside; stopping the job",
                            self.job.name,
                            i,
                        )
                        self._stopping.set()
                        self.done.set()
                    else:
                        self._fail(WorkerFailed(i, reason))
                    return
            if len(self._finished) == self.parallelism and self.cfg.exit_at_end:
                self.done.set()
            time.sleep(0.02)

    def _on_message(self, index: int, msg: tuple[str, Any]) -> None:
        kind, payload = msg
        if kind == "status":
            with self._lock:
                self._status[index] = payload
        elif kind == "finished":
            self._finished.add(index)
            log.info("job=%s worker=%d reached the end of its input", self.job.name, index)
        elif kind == "failed":
            self._fail(WorkerFailed(index, str(payload)))

    def _root_cause(self, failure: WorkerFailed, wait_s: float = 1.0) -> WorkerFailed:
        """A survivor that lost a peer reports first; the peer that died is the cause. Its
        connection closes a moment before its process can be reaped, so wait for it briefly."""
        deadline = time.monotonic() + wait_s
        while True:
            for i, proc in enumerate(self._procs):
                if i != failure.worker and not proc.is_alive() and proc.exitcode not in (0, None):
                    return WorkerFailed(i, self._failure_reason(i, proc))
            if time.monotonic() >= deadline:
                return failure
            time.sleep(0.02)

    def _failure_reason(self, index: int, proc: BaseProcess) -> str:
        conn = self._conns[index]
        try:
            while conn.poll(0):
                kind, payload = conn.recv()
                if kind == "failed":
                    return str(payload)
        except (EOFError, OSError):
            pass
        return f"process {proc.pid} exited with code {proc.exitcode}"

    def _fail(self, failure: WorkerFailed) -> None:
        if failure.reason.startswith("lost workers"):
            failure = self._root_cause(failure)
        if self.failure is None:
            self.failure = failure
            log.error("job=%s stopped: %s", self.job.name, failure)
        self._stopping.set()
        self.done.set()

    # -- what the API reads --------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return len(self._finished) == self.parallelism

    def worker_status(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(self._status.get(i, {"worker": i})) for i in range(self.parallelism)]

    def operator_watermark(self, op: str) -> int:
        """An operator's watermark: the minimum over its workers (MIN until all reported)."""
        marks = []
        for st in self.worker_status():
            ops = st.get("operators", {})
            if op not in ops:
                return MIN_WATERMARK
            marks.append(ops[op]["watermark"])
        return min(marks) if marks else MIN_WATERMARK

    def state(self) -> str:
        if self.failure is not None:
            return "failed"
        if self.finished:
            return "finished"
        return "running" if self._status else "starting"
