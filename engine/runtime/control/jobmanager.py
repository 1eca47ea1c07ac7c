"""The job manager: starts the workers, follows their status, notices when one dies.

It runs in the ``weir run`` process, beside the API unless ``--no-api``. Workers are spawned (not
forked), each loads the job file itself, so user functions never need to be pickled. For API
processes that run apart (``weir api``) it publishes its status to a file (``status.py``) and
serves the admin operations on a loopback control channel (``control.py``).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from weir.engine.errors import ConfigError, WorkerFailed
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control import admin, status
from weir.engine.runtime.control.coordinator import Coordination
from weir.engine.runtime.task.chain import sink_nodes
from weir.engine.runtime.task.worker import default_side_sink, worker_main
from weir.engine.sinks import Sink
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import range_for_operator

log = logging.getLogger(__name__)


class JobManager(Coordination):
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
        self._init_coordination(CheckpointStorage(cfg.checkpoints_root, job.name))
        self.restored_from: Path | None = None
        self.generation = 0  # bumped by every restart: readers of worker state reopen
        self.restarts = 0
        self._control: admin.ControlServer | None = None
        self._publisher: status.StatusPublisher | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers: from empty state, or from the checkpoint ``--restore`` names.
        Earlier local state of this job is removed either way (a restore rebuilds it)."""
        restore = self._resolve_restore()
        if self.cfg.checkpoint_interval_ms > 0:
            self.storage.ensure()
        self._next_id = self.storage.next_id()
        job_dir = self.cfg.job_dir(self.job.name)
        for old in job_dir.glob("worker-*"):
            shutil.rmtree(old)
        job_dir.mkdir(parents=True, exist_ok=True)
        if restore is None:
            for sink in self._sinks():
                sink.prepare()  # a restored job appends: its sinks are at-least-once
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

    def _resolve_restore(self) -> Path | None:
        wanted = self.cfg.restore
        if not wanted:
            return None
        if wanted == "latest":
            n = self.storage.latest_valid()
            if n is None:
                raise ConfigError(
                    f"--restore latest: job {self.job.name!r} has no complete checkpoint under "
                    f"{self.storage.base}; run it with --checkpoint-interval-ms first, or drop "
                    "--restore"
                )
            return self.storage.chk_dir(n).resolve()
        path = Path(wanted).resolve()
        if path.name == "_metadata":
            path = path.parent
        if not path.name.startswith("chk-") or not path.name[4:].isdigit():
            raise ConfigError(
                f"--restore {wanted}: not a checkpoint directory; pass 'latest' or a chk-<n> "
                "directory holding a _metadata file"
            )
        problem = CheckpointStorage(path.parent.parent, path.parent.name).problem(
            int(path.name[4:])
        )
        if problem is not None:
            raise ConfigError(f"--restore {wanted}: cannot restore this checkpoint: {problem}")
        return path

    def _serve_api_processes(self, job_dir: Path) -> None:
        """The status file and the control channel that ``weir api`` processes use."""
        self._control = admin.ControlServer(
            admin.write_key(job_dir),
            {
                "savepoint": lambda a: self.trigger_savepoint(float(a.get("timeout_s", 60.0))),
                "backfill": lambda a: self.ingest_backfill(
                    dict(a.get("req", {})), float(a.get("timeout_s", 600.0))
                ),
            },
        )
        self._control.start()
        port = self._control.port
        self._publisher = status.StatusPublisher(
            status.status_path(job_dir), lambda: status.snapshot(self, port)
        )
        self._publisher.start()

    def _publish(self) -> None:
        if self._publisher is not None:
            self._publisher.publish()

    def _spawn(self, restore: Path | None) -> None:
        self.restored_from = restore
        cfg = replace(self.cfg, restore_from=restore, run_id=f"{self.cfg.run_id}-{self.generation}")
        ctx = mp.get_context("spawn")
        self._procs, self._conns = [], []
        for i in range(self.parallelism):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=worker_main,
                args=(cfg, i, child),
                name=f"weir-{self.job.name}-worker-{i}",
                daemon=True,
            )
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)

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
        if self._control is not None:
            self._control.stop()
        if self._publisher is not None:
            state = self.state()
            self._publisher.stop(state="stopped" if state in ("running", "starting") else state)
        self.done.set()

    def _follow(self) -> None:
        while not self._stopping.is_set():
            generation = self.generation
            for i, (proc, conn) in enumerate(zip(self._procs, self._conns, strict=True)):
                try:
                    while generation == self.generation and conn.poll(0):
                        self._on_message(i, conn.recv())
                except (EOFError, OSError):
                    pass
                if generation != self.generation or self._stopping.is_set():
                    break  # restarted (new processes) or stopping
                if not proc.is_alive():
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
                    break
            else:
                try:
                    self._coordinate()
                except Exception:  # noqa: BLE001 - the monitor must outlive a coordinator bug
                    log.exception("job=%s checkpoint coordinator error", self.job.name)
                    self._abort("coordinator error (see the log)")
            if self.finished and self.cfg.exit_at_end and self._final_checkpoint_settled():
                self.done.set()
            time.sleep(0.02)

    def _on_message(self, index: int, msg: tuple[Any, ...]) -> None:
        kind, payload = msg[0], msg[1]
        if kind == "status":
            with self._lock:
                self._status[index] = payload
        elif kind == "finished":
            self._finished.add(index)
            log.info("job=%s worker=%d reached the end of its input", self.job.name, index)
        elif kind == "failed":
            self._fail(WorkerFailed(index, str(payload)))
        elif kind in ("ack", "decline"):
            self._on_checkpoint_reply(kind, index, msg[1], msg[2])
        elif kind in ("ingest_check_done", "ingest_done"):
            with self._lock:
                waiting = self._ingests.get(msg[1])
            if waiting is not None:
                waiting[index] = msg[2]

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
        if self._stopping.is_set():
            return
        if failure.reason.startswith("lost workers"):
            failure = self._root_cause(failure)
        if self.restarts < self.cfg.max_restarts:
            self._restart(failure)
            return
        if self.failure is None:
            self.failure = failure
            log.error("job=%s stopped: %s", self.job.name, failure)
        self._stopping.set()
        self.done.set()

    def _restart(self, failure: WorkerFailed) -> None:
        """The fixed-delay restart strategy: stop every worker, wait, start them all again from
        the latest complete checkpoint (or from the start when there is none)."""
        self.restarts += 1
        log.error(
            "job=%s %s; restarting (attempt %d of %d) in %d ms",
            self.job.name,
            failure,
            self.restarts,
            self.cfg.max_restarts,
            self.cfg.restart_delay_ms,
        )
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
        for proc in self._procs:
            proc.join(5.0)
        for conn in self._conns:
            conn.close()
        self._pending = None
        if self._stopping.wait(self.cfg.restart_delay_ms / 1000.0):
            return
        n = self.storage.latest_valid() if self.cfg.checkpoint_interval_ms > 0 else None
        restore = self.storage.chk_dir(n).resolve() if n is not None else self.restored_from
        with self._lock:
            self._status = {}
        self._finished = set()
        self._final_triggered = False
        self.generation += 1
        for old in self.cfg.job_dir(self.job.name).glob("worker-*"):
            shutil.rmtree(old, ignore_errors=True)
        if restore is None:
            for sink in self._sinks():
                sink.prepare()
        self._spawn(restore)
        self._next_trigger = time.monotonic() + self.cfg.checkpoint_interval_ms / 1000.0
        self._publish()
        log.info("job=%s restarted from %s", self.job.name, restore or "the start")

    # -- what the API reads --------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return len(self._finished) == self.parallelism

    def worker_status(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(self._status.get(i, {"worker": i})) for i in range(self.parallelism)]

    def operator_watermark(self, op: str) -> int:
        return status.operator_watermark(self.worker_status(), op)

    def state(self) -> str:
        if self.failure is not None:
            return "failed"
        if self.finished:
            return "finished"
        return "running" if self._status else "starting"
