"""A job's workers as one Spark barrier stage (``weir run --master spark://…``).

Spark is the resource manager: the job manager (this process, Spark's driver) submits
``parallelism`` long-running tasks as one barrier stage, so they start together and, when one
fails, Spark kills the others and fails the stage: weir's restart model. Each task
(``task.spark_task``) connects back to the job manager's link listener here, proves it holds
the attempt's secret (the exchange's handshake, ``peerauth``, with the job manager as the
listener ``peerauth.MANAGER``), and from then on speaks the local workers' messages over that
TCP connection. Its worker runs unchanged: exchange over TCP, state under the executor's own
directory, checkpoints into the shared storage.

What travels inside Spark's task description (``TaskPayload``): the job file's text, the run's
settings, this listener's address, the attempt's secret and the storage and Kafka settings
(``AWS_*``, ``WEIR_S3_*``, ``WEIR_KAFKA_*``) the tasks need. Protect it as Spark's own traffic:
``spark.authenticate`` and ``spark.network.crypto.enabled`` on a shared network.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from weir.base.errors import WorkerFailed
from weir.base.settings import read_env
from weir.engine.runtime import peerauth
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.control.workers import last_words, send_all
from weir.engine.runtime.messages import FromWorker, ToWorker, WorkerLink
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.settings import SPARK_LOCAL_IP
from weir.engine.runtime.task.acceptor import Acceptor, Stopped
from weir.engine.runtime.task.spark_task import TaskPayload, run_task

log = logging.getLogger(__name__)

CONNECT_S = 120.0  # from submitting the stage to every task connected (executors may start)
SLOTS_S = 60.0  # the cluster's time to offer every task slot a restart needs
STOP_S = 30.0  # for a cancelled stage's tasks to be gone
FORWARDED = ("AWS_", "WEIR_S3_", "WEIR_KAFKA_")  # settings the tasks need, from this process


class TaskLink:
    """The job manager's end of task ``index``'s connection, before and after it connects:
    messages sent before are held, and a closed connection marks the task lost."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._link: WorkerLink | None = None
        self._held: list[ToWorker] = []
        self._lock = threading.Lock()
        self.lost = False

    def attach(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = WorkerLink(Connection(sock.detach()))
        with self._lock:
            for msg in self._held:
                link.send(msg)
            self._held = []
            self._link = link

    def send(self, msg: ToWorker) -> None:
        with self._lock:
            if self._link is None:
                self._held.append(msg)
                return
        self._link.send(msg)

    def poll(self, timeout: float = 0.0) -> bool:
        return self._link is not None and not self.lost and self._link.poll(timeout)

    def waitable(self) -> Connection | None:
        """The connection to wait on; None before the task connects or once it is lost."""
        link = self._link
        return None if link is None else link.waitable()

    def receive(self) -> FromWorker:
        assert self._link is not None
        try:
            return self._link.receive()
        except (EOFError, OSError):
            self.lost = True
            raise

    def close(self) -> None:
        if self._link is not None:
            self._link.close()


class SparkWorkers:
    """``workers.WorkerGroup`` on a Spark cluster: one barrier stage per attempt."""

    def __init__(self, cfg: RunConfig) -> None:
        from weir.engine.runtime.control.cluster import check_conf, check_reachable, parse_master

        self._master = parse_master(cfg.master or "")
        self._conf = dict(cfg.spark_conf)
        check_conf(self._conf)
        check_reachable(self._master)
        self._host = cfg.driver_host or read_env(SPARK_LOCAL_IP) or "127.0.0.1"
        self._spark: Any = None
        self.links: list[TaskLink] = []
        self.auth: PeerAuth | None = None
        self._listener = socket.create_server((self._host, 0))
        self._address = f"tcp:{self._host}:{self._listener.getsockname()[1]}"
        self._attempt_over = threading.Event()
        self._stage: threading.Thread | None = None
        self._stage_error: str | None = None
        self._stage_done = threading.Event()
        self._group = ""

    # -- an attempt ------------------------------------------------------------------------------

    def spawn(self, cfg: RunConfig, facts: RunFacts, job_name: str, attempt: int) -> None:
        """Submit ``cfg.parallelism`` tasks as one barrier stage, once the cluster offers that
        many slots at once (``ConfigError`` saying so when it does not)."""
        from weir.engine.runtime.control.cluster import wait_for_slots

        spark = self._session(job_name, cfg.parallelism)
        wait_for_slots(spark, cfg.parallelism, SLOTS_S)
        self.auth = auth = PeerAuth.new(attempt)
        self.links = [TaskLink(i) for i in range(cfg.parallelism)]
        self._attempt_over = over = threading.Event()
        self._stage_error, self._stage_done = None, threading.Event()
        self._group = f"weir-{job_name}-{facts.run_id}"
        payload = TaskPayload.build(cfg, facts, job_name, self._address, auth, FORWARDED)
        threading.Thread(
            target=self._accept, args=(auth, self.links, over), name="weir-task-links", daemon=True
        ).start()
        self._stage = threading.Thread(
            target=self._run_stage,
            args=(spark, payload.encode(), cfg.parallelism, self._group, self._stage_done),
            name="weir-barrier-stage",
            daemon=True,
        )
        self._stage.start()
        log.info(
            "job=%s submitted %d workers as a barrier stage on %s (group=%s)",
            job_name, cfg.parallelism, self._master, self._group,
        )  # fmt: skip

    def _session(self, job_name: str, parallelism: int) -> Any:
        if self._spark is None:
            from weir.engine.runtime.control.cluster import cluster_session

            # the job takes the cores its stage needs, not the whole cluster (a standalone
            # master gives an application every free core unless told): other jobs fit beside
            cpus = int(self._conf.get("spark.task.cpus", "1"))
            conf = {"spark.cores.max": str(parallelism * cpus), **self._conf}
            # PySpark's SparkContext takes SIGINT to cancel every job: the job manager would
            # see a failed stage and restart while Ctrl-C is stopping it; weir's own handling
            # (a graceful stop, tasks told to stop) stays in place
            main = threading.current_thread() is threading.main_thread()
            previous = signal.getsignal(signal.SIGINT) if main else None
            try:
                self._spark = cluster_session(self._master, f"weir-{job_name}", conf, self._host)
            finally:
                if main:
                    signal.signal(signal.SIGINT, previous)
            logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per thread it served
        return self._spark

    def _accept(self, auth: PeerAuth, links: list[TaskLink], over: threading.Event) -> None:
        awaited = frozenset(range(len(links)))
        acceptor = Acceptor(peerauth.MANAGER, awaited, auth, self._listener)
        try:
            proved = acceptor.run(over.is_set, time.monotonic() + CONNECT_S)
        except Stopped:
            return
        except WorkerFailed as exc:
            self._stage_error = f"{exc.reason} within {CONNECT_S:.0f} s of the stage's submission"
            return
        for i, sock in proved.items():
            links[i].attach(sock)

    def _run_stage(
        self, spark: Any, payload: bytes, n: int, group: str, done: threading.Event
    ) -> None:
        from weir.engine.runtime.control.cluster import failure_summary

        try:  # the context too: a py4j error there must still say why and set ``done``
            sc = spark.sparkContext
            sc.setJobGroup(group, f"weir workers ({n})", interruptOnCancel=True)
            sc.parallelize(range(n), n).barrier().mapPartitions(
                lambda it: run_task(payload, it)
            ).collect()
        except Exception as exc:  # noqa: BLE001 - the stage's failure is the workers'
            self._stage_error = failure_summary(exc)
        finally:
            done.set()

    # -- following it ----------------------------------------------------------------------------

    def alive(self, index: int) -> bool:
        link = self.links[index]
        if link.lost or self._stage_error is not None:
            return False
        return not self._stage_done.is_set()

    def stopped_cleanly(self, index: int) -> bool:
        return False  # a task ends when told to; anything else is a failure to restart from

    def broadcast(self, msg: ToWorker) -> None:
        send_all(self.links, msg)

    def failure_reason(self, index: int) -> str:
        said = last_words(self.links[index])
        if said is not None:
            return said
        self._stage_done.wait(5.0)  # Spark says why the stage failed a moment after
        if self._stage_error is not None:
            return f"the barrier stage failed: {self._stage_error}"
        return f"task {index}'s connection to the job manager closed"

    def root_cause(self, failure: WorkerFailed, wait_s: float = 1.0) -> WorkerFailed:
        """A survivor that lost a peer reports first; Spark's reason names the task that
        failed."""
        self._stage_done.wait(max(wait_s, 5.0))
        if self._stage_error is not None:
            return WorkerFailed(failure.worker, f"the barrier stage failed: {self._stage_error}")
        return failure

    # -- ending it -------------------------------------------------------------------------------

    def join(self, timeout_s: float) -> None:
        """Wait for the stage to end (its tasks stop when told); cancel it at the deadline."""
        if not self._stage_done.wait(timeout_s):
            log.warning("the barrier stage did not end in %.0f s; cancelling it", timeout_s)
            self._cancel()
        self._attempt_over.set()

    def kill(self) -> None:
        """Cancel the stage (Spark kills its tasks) and wait until it has ended, so a new
        stage finds the slots free."""
        self._attempt_over.set()
        self._cancel()
        for link in self.links:
            link.close()

    def _cancel(self) -> None:
        if self._spark is not None and self._stage is not None and not self._stage_done.is_set():
            try:
                self._spark.sparkContext.cancelJobGroup(self._group)
            except Exception as exc:  # noqa: BLE001 - a dead JVM has no stage left to cancel
                log.warning("could not cancel the barrier stage %s: %s", self._group, exc)
                return
            if not self._stage_done.wait(STOP_S):
                log.warning("the cancelled barrier stage %s has not ended", self._group)

    def release(self) -> None:
        """End the Spark application (its JVM may be gone already: a signal to the whole
        process group reaches it too)."""
        self._listener.close()
        spark, self._spark = self._spark, None
        if spark is not None:
            try:
                spark.stop()
            except Exception as exc:  # noqa: BLE001 - the job has ended either way
                log.info("the Spark application had ended already: %s", type(exc).__name__)
