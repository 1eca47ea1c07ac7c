"""The job manager: starts the workers, follows their messages, notices when one dies, and
restarts them all from the latest complete checkpoint (Flink's failure-rate restart strategy,
``restarts``).

It runs in the ``weir run`` process, beside the API unless ``--no-api``. Workers are spawned (not
forked) and each loads the job file itself, so user functions never need to be pickled; what
travels on their pipes is ``messages``, data only. Its parts: the checkpoint coordinator, live
backfills, and for API processes that run apart (``weir api``) and the lifecycle commands
(``weir list``, ``weir stop``, ``weir cancel``) the status file and the admin control channel. It
implements ``view.JobRuntime``, what the API reads.

A job ends once (``_end``), in the state it ends in: ``stopped`` (SIGTERM, Ctrl-C, ``weir stop``,
with or without a savepoint), ``cancelled`` (``weir cancel``: the workers are killed, state is as
of the last checkpoint), or as it was (``finished``, ``failed``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from weir.base.errors import (
    ConfigError,
    ControlError,
    DeadLetterLimit,
    LeaseLost,
    MessageError,
    WeirError,
    WorkerFailed,
)
from weir.base.files import remove_tree
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.control import admin
from weir.engine.runtime.control.backfill import LiveBackfill
from weir.engine.runtime.control.commits import JobOutputs
from weir.engine.runtime.control.coordinator import CheckpointCoordinator
from weir.engine.runtime.control.launch import worker_group
from weir.engine.runtime.control.leadership import Leadership
from weir.engine.runtime.control.outcome import DeadLetterJudge, summarise
from weir.engine.runtime.control.restarts import FailureRateRestarts
from weir.engine.runtime.control.resume import lead
from weir.engine.runtime.control.runlock import RunLock
from weir.engine.runtime.control.status import StatusPublisher, job_status, status_path
from weir.engine.runtime.messages import (
    BackfillReply,
    CheckpointAck,
    CheckpointDecline,
    ExchangeListening,
    ExchangePeers,
    Failed,
    Finished,
    FromWorker,
    StateServing,
    StatusReport,
    Stop,
    WorkerStatus,
)
from weir.engine.runtime.netio import Waker
from weir.engine.runtime.outputs import dead_letter_sink
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.view import (
    BackfillEntry,
    CheckpointSummary,
    JobStatus,
    SavepointResult,
    operator_watermark,
    unreported,
)
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import range_for_operator

log = logging.getLogger(__name__)

# the monitor's wait without a message (``_wait_for_work``): what it waits for at least and at
# most; messages, wakes and the coordinator's due times end it sooner
FOLLOW_MIN_S = 0.02
FOLLOW_MAX_S = 0.1


class JobManager:
    def __init__(self, cfg: RunConfig, job: Job) -> None:
        if cfg.parallelism > job.max_parallelism:
            raise ConfigError(
                f"`parallelism`={cfg.parallelism} exceeds the job's max_parallelism="
                f"{job.max_parallelism} (its number of key groups); use at most that"
            )
        self.cfg = cfg
        self.facts = RunFacts()
        self.job = job
        self.parallelism = cfg.parallelism
        self.ranges = [
            range_for_operator(job.max_parallelism, cfg.parallelism, i)
            for i in range(cfg.parallelism)
        ]
        self._workers = worker_group(cfg)
        self._serving: dict[int, str] = {}  # a cluster's tasks' state servers, by worker
        self._status: dict[int, WorkerStatus] = {}
        # operator watermarks of ``_status``, replaced whenever it changes: every point lookup
        # asks for one, and a status arrives a few times a second
        self._marks: dict[tuple[str, str], int] = {}
        self._finished: set[int] = set()
        self._listening: dict[int, str] = {}  # this attempt's exchange addresses, by worker
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.done = threading.Event()  # set when the job finished or failed
        self.failure: WeirError | None = None
        self.leadership: Leadership | None = None  # the job's lease, once this run holds it
        self._spawn_lock = threading.Lock()
        self._dead_letters = DeadLetterJudge(cfg, job.name, dead_letter_sink(cfg, job).describe())
        self._monitor: threading.Thread | None = None
        self._waker = Waker()  # ends the monitor's wait early (``_wait_for_work``)
        broadcast = self._workers.broadcast
        self.outputs = JobOutputs(cfg, job)
        self.coordinator = CheckpointCoordinator(
            cfg, job, self.ranges, broadcast, self._publish, self.outputs.positions
        )
        self.coordinator.wake = self._waker.wake
        self._backfill = LiveBackfill(
            job.name,
            cfg.backfill_dir,
            cfg.parallelism,
            job.max_parallelism,
            broadcast,
            self._publish,
            self.coordinator,
        )
        self._restored: str | None = None
        self.generation = 0  # bumped by every restart: readers of worker state reopen
        self.restarts = 0  # in this run, for the API; the strategy counts within its interval
        self._restarts = FailureRateRestarts(cfg.max_restarts, cfg.restart_interval_ms)
        self._control: admin.ControlServer | None = None
        self._publisher: StatusPublisher | None = None
        self._ended: str | None = None  # the state the job ended in
        self._end_lock = threading.Lock()
        self.api_url: str | None = None  # where the HTTP API serves, once it does
        self._run_lock = RunLock(cfg.job_dir(job.name), job.name)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers: from empty state, or from the checkpoint ``--restore`` names.
        First this run takes the state directory's lock (``ConfigError`` if another run
        holds it), then the job's lease (waiting as a standby while another job manager
        holds it: ``control.resume.lead``). Earlier local state of this job is removed either
        way (a restore rebuilds it)."""
        self._run_lock.acquire()
        try:
            led = lead(self.cfg, self.job.name, self.storage, self.facts.run_id, self._stopping)
            if led is None:
                raise ControlError(f"job {self.job.name!r} stopped while waiting for its lease")
            self.leadership, begin = led
            self.coordinator.lead_by(self.leadership)
            restore = begin.location
            self.coordinator.start()
        except BaseException:
            if self.leadership is not None:
                self.leadership.release()
            self._run_lock.release()
            raise
        # renewed from now on: a restore's download or a Spark application's start (tens of
        # seconds) may take longer than the lease; a lease lost meanwhile spawns no worker
        self.leadership.start_renewing(self._lease_lost)
        job_dir = self.cfg.job_dir(self.job.name)
        for old in job_dir.glob("worker-*"):
            remove_tree(old)
        if restore is None:
            self.outputs.prepare()
        else:
            self.outputs.rewind_to(self.coordinator.metadata_at(restore))
        self._spawn(restore)
        self._monitor = threading.Thread(target=self._follow, name="weir-jobmanager", daemon=True)
        self._monitor.start()
        self._serve_api_processes(job_dir)
        log.info(
            "job=%s started workers=%d%s",
            self.job.name,
            self.parallelism,
            f" restored from {restore}" if restore else "",
        )

    def _serve_api_processes(self, job_dir: Path) -> None:
        """The status file and the control channel that ``weir api`` processes and the lifecycle
        commands use. Once the job has ended, the status names no control port nor API."""
        key = admin.write_key(job_dir)
        self._control = admin.ControlServer(key, admin.handlers(self))
        self._control.start()
        port = self._control.port

        def snapshot() -> JobStatus:
            if self._ended is not None:
                return job_status(self, self.job, self.facts.run_id, None, None, ended=True)
            return job_status(self, self.job, self.facts.run_id, port, self.api_url)

        self._publisher = StatusPublisher(status_path(job_dir), snapshot)
        self._publisher.start()

    def serving_at(self, url: str) -> None:
        """The HTTP API listens at ``url``: ``weir list`` shows it, the lease names it."""
        self.api_url = url
        self._publish()
        if self.leadership is not None:
            self.leadership.serving_at(url)

    def _publish(self) -> None:
        if self._publisher is not None:
            self._publisher.publish()

    def _poke(self) -> None:
        """The job's state may have changed: the status file says so now, not at its period."""
        if self._publisher is not None:
            self._publisher.poke()

    def _spawn(self, restore: str | None) -> None:
        self._restored = restore
        run_id = f"{self.facts.run_id}-{self.generation}"
        facts = replace(self.facts, restore_from=restore, run_id=run_id)
        self._listening = {}
        self._serving = {}
        with self._spawn_lock:  # a lost lease kills under it: no worker starts after that
            if self.leadership is None or self.leadership.lost is None:
                self._workers.spawn(self.cfg, facts, self.job.name, self.generation)

    def _lease_lost(self, why: str) -> None:
        """The lease is no longer ours (from the lease's watchdog thread): kill the workers at
        once, whatever the monitor thread is doing (a held output is never written, no
        checkpoint is committed), and end the job as failed with ``LeaseLost``."""
        if self._ended is not None:
            return
        self._stopping.set()
        self._waker.wake()
        with self._spawn_lock:
            self._workers.kill()
        if self.failure is None:
            self.failure = LeaseLost(why)
        self.coordinator.fail_all(why)
        self.done.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the job gracefully (unless it ended already), close its control channel and
        release the lease (the next job manager takes over at once)."""
        self._end("stopped", timeout_s=timeout_s)
        if self._control is not None:
            self._control.stop()
        if self.leadership is not None:
            self.leadership.release()
        self._run_lock.release()

    def _end(self, as_state: str, *, kill: bool = False, timeout_s: float = 10.0) -> None:
        """Stop the workers (``kill``: at once, without a flush) and publish the state the job
        ended in: ``as_state``, unless it had finished or failed. Once; a second call waits for
        the first."""
        with self._end_lock:
            if self._ended is not None:
                return
            self._stopping.set()
            self._waker.wake()
            if self._monitor is not None:
                self._monitor.join(2.0)
            self.coordinator.close(f"the job is being {as_state}")
            if kill:
                self._workers.kill()
            else:
                self._workers.broadcast(Stop())
                self._workers.join(timeout_s)
            self._workers.release()
            state = self.state()
            self._ended = as_state if state in ("running", "starting") else state
            if self._publisher is not None:
                self._publisher.stop(self._ended)
            self.done.set()

    def stop_job(self, savepoint: bool, timeout_s: float) -> admin.StopResult:
        """``weir stop``: with ``savepoint``, stop-with-savepoint (sources stop at its barrier,
        the savepoint completes, then the workers stop; if it fails the job goes on); else a
        graceful stop, as SIGTERM."""
        self._check_running("stop")
        taken = self.coordinator.savepoint(timeout_s, stop=True) if savepoint else None
        self._end("stopped")
        if taken is not None:
            n, path = taken["id"], taken["path"]
            log.info("job=%s stopped with savepoint=%d path=%s", self.job.name, n, path)
        return {"job": self.job.name, "savepoint": taken, "state": self.state()}

    def cancel_job(self) -> admin.CancelResult:
        """``weir cancel``: kill the workers now; no savepoint, no flush of open windows."""
        self._check_running("cancel")
        self._end("cancelled", kill=True)
        n = self.last_checkpoint
        log.warning("job=%s cancelled; its state is as of checkpoint=%s", self.job.name, n)
        return {"job": self.job.name, "state": self.state(), "last_checkpoint": n}

    def _check_running(self, what: str) -> None:
        if self.failure is not None or self._stopping.is_set():
            now = "failed" if self.failure is not None else self._ended or "stopping"
            raise ControlError(f"job {self.job.name!r} is not running ({now}); nothing to {what}")

    # -- following the workers -----------------------------------------------------------------

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                verdict = self._step()
            except LeaseLost as exc:  # a commit found the lease taken
                self._lease_lost(str(exc))
                verdict = None
            except Exception as exc:  # noqa: BLE001 - a dead monitor would hang the job
                log.exception("job=%s the job manager's monitor failed", self.job.name)
                self._workers.kill()
                self._give_up(WeirError(f"the job manager failed: {type(exc).__name__}: {exc}"))
                return
            if verdict is not None:
                self._give_up(verdict)
                return
            if self.finished and self.cfg.exit_at_end and self.coordinator.final_settled():
                self.done.set()
            self._wait_for_work()

    def _wait_for_work(self) -> None:
        """Until a worker's message (or a closed link), a wake (a savepoint asked for, the
        end), or the coordinator's next due time: at least ``FOLLOW_MIN_S`` without a message
        (no spinning while something is due but cannot begin), at most ``FOLLOW_MAX_S`` (a
        worker that died without closing its link, a stop's deadline). A thread that looked
        every 20 ms woke 50 times a second, under the GIL the API serves with."""
        due = self.coordinator.due_in(self.finished)
        waitables = [w for link in self._workers.links if (w := link.waitable()) is not None]
        self._waker.wait(waitables, min(FOLLOW_MAX_S, max(FOLLOW_MIN_S, due)))

    def _step(self) -> DeadLetterLimit | None:
        """Handle the workers' messages and tick the coordinator; a verdict that fails the
        job (too many dead letters), if any. ``LeaseLost`` when a commit found the lease
        taken."""
        if not self._poll_workers():
            return None
        try:
            with self._lock:
                ready = len(self._status) == self.parallelism
            self.coordinator.tick(ready, self.finished)
        except LeaseLost:
            raise
        except Exception:  # noqa: BLE001 - the monitor must outlive a coordinator bug
            log.exception("job=%s checkpoint coordinator error", self.job.name)
            self.coordinator.abort("coordinator error (see the log)")
        return self._dead_letters.verdict(self.worker_status(), self.finished)

    def _poll_workers(self) -> bool:
        """Handle every worker's messages; False when one failed (or the job is stopping)."""
        generation = self.generation
        workers = self._workers
        for i, link in enumerate(workers.links):
            while generation == self.generation:
                try:
                    if not link.poll(0):
                        break
                    message = link.receive()
                except (EOFError, OSError):  # the link has ended: not waited on again
                    break
                except MessageError as exc:  # not a weir worker of this version: a failure
                    self._fail(WorkerFailed(i, f"sent what the job manager cannot read: {exc}"))
                    break
                # outside the link's errors: what handling it raises (a restart's OSError) is
                # the monitor's to report (``_follow``), never dropped as a closed link
                self._on_message(i, message)
            if generation != self.generation or self._stopping.is_set():
                return False  # restarted (new processes) or stopping
            if not workers.alive(i):
                if workers.stopped_cleanly(i):
                    log.info(
                        "job=%s worker=%d was stopped from outside; stopping the job",
                        self.job.name,
                        i,
                    )
                    self._stopping.set()
                    self.done.set()
                else:
                    self._fail(WorkerFailed(i, workers.failure_reason(i)))
                return False
        return True

    def _on_message(self, index: int, msg: FromWorker) -> None:
        match msg:
            case ExchangeListening(address=address):
                self._listening[index] = address
                if len(self._listening) == self.parallelism:
                    addresses = tuple(self._listening[i] for i in range(self.parallelism))
                    self._workers.broadcast(ExchangePeers(addresses))
            case StateServing(address=address):
                self._serving[index] = address
            case StatusReport(status=status):
                with self._lock:
                    first = not self._status
                    self._status[index] = status
                    self._marks = {}
                if first:  # starting -> running
                    self._poke()
            case Finished():
                self._finished.add(index)
                self._poke()
                log.info("job=%s worker=%d reached the end of its input", self.job.name, index)
                if self.finished:
                    where = self._dead_letters.where
                    retention = self.cfg.state_retention_ms
                    summarise(self.job.name, self.worker_status(), where, retention)
            case Failed(reason=reason):
                self._fail(WorkerFailed(index, reason))
            case CheckpointAck():
                self.coordinator.acknowledge(index, msg)
            case CheckpointDecline():
                self.coordinator.decline(index, msg)
            case BackfillReply():
                self._backfill.reply(index, msg)

    def _fail(self, failure: WorkerFailed) -> None:
        if self._stopping.is_set():
            return
        if failure.reason.startswith("lost workers"):
            failure = self._workers.root_cause(failure)
        if self._restarts.allow():
            try:
                self._restart(failure)
                return
            except WeirError as exc:  # e.g. an output it cannot rewind: the job fails, saying so
                failure = WorkerFailed(failure.worker, f"{failure.reason}; restart failed: {exc}")
            except Exception as exc:  # noqa: BLE001 - e.g. no process could start (EMFILE, EAGAIN)
                log.exception("job=%s restart failed", self.job.name)
                self._workers.kill()
                failure = WorkerFailed(
                    failure.worker,
                    f"{failure.reason}; restart failed: {type(exc).__name__}: {exc}",
                )
        if self.failure is None:
            log.error(
                "job=%s stopped: %s (restarts within %d ms: %d, restart_failures=%d)",
                self.job.name,
                failure,
                self.cfg.restart_interval_ms,
                self._restarts.recent,
                self.cfg.max_restarts,
            )
        self._give_up(failure)

    def _give_up(self, failure: WeirError) -> None:
        """The job fails for good with ``failure`` (the first one, if it failed already)."""
        if self.failure is None:
            self.failure = failure
            if not isinstance(failure, WorkerFailed):  # a worker's is logged with its restarts
                log.error("job=%s stopped: %s", self.job.name, failure)
            self.coordinator.fail_all(f"the job failed: {failure}")
        self._stopping.set()
        self._poke()
        self.done.set()

    def _restart(self, failure: WorkerFailed) -> None:
        """Stop every worker, wait, start them all again from the latest complete checkpoint
        (or from where this run started when there is none)."""
        self.restarts += 1
        log.error(
            "job=%s %s; restarting (attempt %d of %d) in %d ms (restarts counted within %d ms)",
            self.job.name,
            failure,
            self._restarts.recent,
            self.cfg.max_restarts,
            self.cfg.restart_delay_ms,
            self.cfg.restart_interval_ms,
        )
        # a savepoint cannot complete across a restart: its caller hears now, not at its timeout
        self.coordinator.fail_all(f"the job is restarting after a failure ({failure})")
        self._workers.kill()
        if self._stopping.wait(self.cfg.restart_delay_ms / 1000.0):
            return
        restore = self.coordinator.latest_complete() or self._restored
        with self._lock:
            self._status = {}
            self._marks = {}
        self._finished = set()
        self.generation += 1
        for old in self.cfg.job_dir(self.job.name).glob("worker-*"):
            try:
                remove_tree(old)
            except OSError as exc:  # the restart goes on, and says what it may find
                log.warning(
                    "job=%s could not remove %s before its restart (%s); a worker that starts "
                    "without a checkpoint may find its old files",
                    self.job.name,
                    old,
                    exc,
                )
        if restore is None:
            self.outputs.keep()
        else:
            self.outputs.rewind_to(self.coordinator.metadata_at(restore))
        self._spawn(restore)
        self.coordinator.restarted()
        self._publish()
        log.info("job=%s restarted from %s", self.job.name, restore or "the start")

    # -- what the API reads (view.JobRuntime) --------------------------------------------------

    @property
    def finished(self) -> bool:
        """Every worker has processed its whole input."""
        return len(self._finished) == self.parallelism

    @property
    def source(self) -> str:
        return self.job.describe_sources()

    @property
    def storage(self) -> CheckpointStorage:
        return self.coordinator.storage

    @property
    def last_checkpoint(self) -> int | None:
        return self.coordinator.last_checkpoint

    @property
    def completed_checkpoints(self) -> int:
        return self.coordinator.completed

    @property
    def checkpoints(self) -> list[CheckpointSummary]:
        return self.coordinator.checkpoints

    @property
    def checkpoint_problem(self) -> str | None:
        return self.coordinator.problem

    @property
    def status_problem(self) -> str | None:
        return None  # in this process: the API sees the job manager itself

    @property
    def failure_reason(self) -> str | None:
        return None if self.failure is None else str(self.failure)

    @property
    def dead_letter_problem(self) -> str | None:
        if self.failure is not None:
            return None  # the failure says it
        return self._dead_letters.problem(self.worker_status())

    @property
    def state_retention_ms(self) -> int:
        return self.cfg.state_retention_ms

    @property
    def restored_from(self) -> str | None:
        return None if self._restored is None else str(self._restored)

    @property
    def backfills(self) -> list[BackfillEntry]:
        return self._backfill.entries

    def worker_status(self) -> list[WorkerStatus]:
        with self._lock:
            found = dict(self._status)
        return [found.get(i) or unreported(i, self.ranges[i]) for i in range(self.parallelism)]

    def operator_watermark(self, op: str) -> int:
        return self._watermark(op, "watermark")

    def state_watermark(self, op: str) -> int:
        return self._watermark(op, "state_watermark")

    def _watermark(self, op: str, which: Literal["watermark", "state_watermark"]) -> int:
        marks = self._marks  # before the statuses: a report meanwhile replaces it, not this
        found = marks.get((op, which))
        if found is None:
            found = marks[op, which] = operator_watermark(self.worker_status(), op, which)
        return found

    @property
    def on_cluster(self) -> bool:
        return self.cfg.master is not None

    def state_endpoint(self, index: int) -> tuple[str | None, PeerAuth | None]:
        """Where a cluster task serves worker ``index``'s live state, and the secret that
        proves this job manager to it (None until it said)."""
        return self._serving.get(index), self._workers.auth

    def state_endpoints(self) -> admin.StateEndpoints:
        """``state_endpoint`` of every worker, for API processes apart (``weir api``): they ask
        over the control channel, which only holders of the job's control key reach."""
        auth = self._workers.auth
        if not self.on_cluster or auth is None:
            raise ControlError(f"job {self.job.name!r} does not run on a cluster")
        return {
            "generation": self.generation,
            "attempt": auth.attempt,
            "secret": auth.secret.hex(),
            "addresses": [self._serving.get(i) for i in range(self.parallelism)],
        }

    def state(self) -> str:
        if self._ended is not None:
            return self._ended
        if self.failure is not None:
            return "failed"
        if self.finished:
            return "finished"
        return "running" if self._status else "starting"

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult:
        if self.failure is not None or self._stopping.is_set():
            raise ControlError(f"job {self.job.name!r} is not running; no savepoint taken")
        return self.coordinator.savepoint(timeout_s)

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry:
        generation = self.generation  # a restart loses what the old workers were told

        def running() -> bool:
            with self._lock:
                reported = bool(self._status)
            alive = self.failure is None and not self._stopping.is_set()
            return alive and reported and self.generation == generation

        return self._backfill.ingest(req, timeout_s, running, self._stopping)
