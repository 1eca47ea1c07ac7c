"""The job manager's coordination of its workers: checkpoints and savepoints (Flink's barrier
snapshots: trigger one at a time, collect every worker's acknowledgement, write ``_metadata``,
retain), and loading a backfill into the running workers (check everywhere, then ingest).

A mixin of ``JobManager``, which owns the workers and their pipes; this part owns the
checkpoint state the API reports (``checkpoints``, ``last_checkpoint``, ``checkpoint_problem``,
``backfills``) and runs on the job manager's monitor thread, except the two blocking requests
(``trigger_savepoint``, ``ingest_backfill``) that API threads make.
"""

from __future__ import annotations

import logging
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from weir.engine.errors import ConfigError, StateError, WorkerFailed
from weir.engine.job import Job
from weir.engine.paths import confined
from weir.engine.runtime.config import RunConfig
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange

log = logging.getLogger(__name__)


class Coordination:
    # the job manager's, read here
    cfg: RunConfig
    job: Job
    parallelism: int
    ranges: list[KeyGroupRange]
    failure: WorkerFailed | None
    _conns: list[Connection]
    _status: dict[int, dict[str, Any]]
    _lock: threading.Lock
    _stopping: threading.Event

    def _init_coordination(self, storage: CheckpointStorage) -> None:
        self.storage = storage
        self.checkpoints: list[dict[str, Any]] = []  # completed in this run, newest last
        self.last_checkpoint: int | None = None
        self.completed_checkpoints = 0
        self.checkpoint_problem: str | None = None  # why the last checkpoint failed, if it did
        self.backfills: list[dict[str, Any]] = []
        self._pending: dict[str, Any] | None = None
        self._next_id = 1
        self._next_trigger = 0.0
        self._savepoints: list[threading.Event] = []
        self._savepoint_done: dict[int, str] = {}
        self._final_triggered = False
        self._ingests: dict[int, dict[int, Any]] = {}
        self._ingest_ids = 0

    @property
    def finished(self) -> bool:  # the job manager's: every worker has processed its input
        raise NotImplementedError

    def _publish(self) -> None:  # the job manager's: status to API processes
        raise NotImplementedError

    def trigger_savepoint(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Take a savepoint (a checkpoint never deleted) and wait for it to complete."""
        if self.failure is not None or self._stopping.is_set():
            raise ConfigError(f"job {self.job.name!r} is not running; no savepoint taken")
        done = threading.Event()
        with self._lock:
            self._savepoints.append(done)
        if not done.wait(timeout_s):
            raise ConfigError(
                f"savepoint of job {self.job.name!r} did not complete in {timeout_s} s"
            )
        with self._lock:
            result = self._savepoint_done.pop(id(done), None)
        if result is None:
            raise ConfigError(f"savepoint of job {self.job.name!r} failed; see the job's log")
        n = int(result)
        return {"id": n, "path": str(self.storage.chk_dir(n).resolve())}

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
        """Load a backfill's SST files into the running workers: every worker checks first that
        it holds no window in the backfill's range; only then do all of them ingest. The files
        must lie under ``--backfill-dir`` (``PathRefused`` otherwise: no ``..``, no symlink out),
        since the request names them."""
        fix = "write backfills under the job's --backfill-dir (weir backfill --work-dir)"
        path = confined(Path(str(req["path"])), self.cfg.backfill_dir, "backfill path", fix)
        files = sorted(path.glob("kg-*.sst")) if path.is_dir() else []
        for f in files:
            confined(f, self.cfg.backfill_dir, "backfill file", fix)
        if not files:
            raise ConfigError(f"{path} is not a directory of backfill SST files (kg-*.sst)")
        if self.failure is not None or self._stopping.is_set() or not self._status:
            raise ConfigError(f"job {self.job.name!r} is not running; nothing was loaded")
        req = {**req, "path": str(path)}
        for phase in ("ingest_check", "ingest"):
            replies = self._ask_workers(phase, req, timeout_s)
            refused = [r["error"] for r in replies.values() if "error" in r]
            if refused:
                raise ConfigError(f"backfill refused: {refused[0]}")
        entry = {
            "op": req["op"],
            "min_end": req["min_end"],
            "max_end": req["max_end"],
            "windows": req.get("windows"),
            "time": now_ms(),
        }
        self.backfills.append(entry)
        self._publish()
        log.info("job=%s loaded backfill %s", self.job.name, entry)
        return entry

    def _ask_workers(self, kind: str, req: dict[str, Any], timeout_s: float) -> dict[int, Any]:
        with self._lock:
            self._ingest_ids += 1
            n = self._ingest_ids
            replies: dict[int, Any] = {}
            self._ingests[n] = replies
        try:
            for conn in self._conns:
                conn.send((kind, n, req))
            deadline = time.monotonic() + timeout_s
            while len(replies) < self.parallelism:
                if time.monotonic() > deadline or self._stopping.is_set():
                    raise ConfigError(f"workers did not answer the backfill's {kind} in time")
                time.sleep(0.02)
            return dict(replies)
        finally:
            with self._lock:
                self._ingests.pop(n, None)

    def _coordinate(self) -> None:
        """Trigger the next checkpoint when it is due (one at a time), time out a stuck one."""
        now = time.monotonic()
        pending = self._pending
        if pending is not None:
            if now - pending["started"] > self.cfg.checkpoint_timeout_ms / 1000.0:
                self._abort(f"timed out after {self.cfg.checkpoint_timeout_ms} ms")
            return
        with self._lock:
            ready = len(self._status) == self.parallelism
            savepoint = bool(self._savepoints)
        periodic = self.cfg.checkpoint_interval_ms > 0 and now >= self._next_trigger
        if self.finished and self.cfg.checkpoint_interval_ms > 0 and not self._final_triggered:
            # the input is fully processed: one final checkpoint holds the end state and offsets
            self._final_triggered = periodic = True
        elif self.finished:
            periodic = False
        if not ready or not (periodic or savepoint):
            return
        n = self._next_id
        self._next_id += 1
        waiters: list[threading.Event] = []
        if savepoint:
            with self._lock:
                waiters, self._savepoints = self._savepoints, []
        self._pending = {
            "id": n,
            "started": now,
            "time": now_ms(),
            "savepoint": savepoint,
            "acks": {},
            "waiters": waiters,
        }
        try:
            self.storage.ensure()
        except StateError as exc:  # storage unusable: this checkpoint fails, processing goes on
            self._abort(str(exc))
            return
        for conn in self._conns:
            try:
                conn.send(("checkpoint", n))
            except OSError:
                pass

    def _final_checkpoint_settled(self) -> bool:
        """With checkpoints on, a finished job ends after its final checkpoint (done or failed)."""
        if self.cfg.checkpoint_interval_ms <= 0:
            return True
        return self._final_triggered and self._pending is None

    def _on_checkpoint_reply(self, kind: str, index: int, n: int, info: Any) -> None:
        pending = self._pending
        if pending is None or pending["id"] != n:
            return
        if kind == "decline":
            self._abort(f"worker {index} declined: {info}")
            return
        pending["acks"][index] = info
        if len(pending["acks"]) == self.parallelism:
            self._complete(pending)

    def _complete(self, pending: dict[str, Any]) -> None:
        n = pending["id"]
        workers = [pending["acks"][i] for i in range(self.parallelism)]
        duration = round((time.monotonic() - pending["started"]) * 1000, 3)
        meta = {
            "id": n,
            "job": self.job.name,
            "time": pending["time"],
            "savepoint": pending["savepoint"],
            "parallelism": self.parallelism,
            "max_parallelism": self.job.max_parallelism,
            "key_group_ranges": [r.to_json() for r in self.ranges],
            "size": sum(w["size"] for w in workers),
            "incremental_size": sum(w["incremental_size"] for w in workers),
            "duration_ms": duration,
            "sync_ms": max(w["sync_ms"] for w in workers),
            "async_ms": max(w["async_ms"] for w in workers),
            "watermark": min(
                (op["watermark"] for w in workers for op in w["operators"].values()),
                default=MIN_WATERMARK,
            ),
            "workers": workers,
        }
        try:
            self.storage.write_metadata(n, meta)
            self.storage.retain(self.cfg.checkpoints_retained)
        except OSError as exc:
            self._abort(f"cannot write its metadata: {exc}")
            return
        self._pending = None
        self.last_checkpoint = n
        self.completed_checkpoints += 1
        self.checkpoint_problem = None
        summary = {k: v for k, v in meta.items() if k != "workers"}
        self.checkpoints = [*self.checkpoints[-99:], summary]
        self._publish()  # before the savepoint's waiters return: API processes see it as done
        for conn in self._conns:
            try:
                conn.send(("completed", n))
            except OSError:
                pass
        for waiter in pending["waiters"]:
            with self._lock:
                self._savepoint_done[id(waiter)] = str(n)
            waiter.set()
        self._next_trigger = time.monotonic() + self.cfg.checkpoint_interval_ms / 1000.0
        log.info(
            "job=%s checkpoint=%d complete size=%d incremental=%d sync_ms=%.1f duration_ms=%.0f",
            self.job.name,
            n,
            meta["size"],
            meta["incremental_size"],
            meta["sync_ms"],
            duration,
        )

    def _abort(self, why: str) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        log.error("job=%s checkpoint=%d failed: %s", self.job.name, pending["id"], why)
        self.checkpoint_problem = f"checkpoint {pending['id']} failed: {why}"
        for waiter in pending["waiters"]:
            waiter.set()
        self._next_trigger = time.monotonic() + self.cfg.checkpoint_interval_ms / 1000.0
