"""A job manager in another process, seen by ``weir api``: ``view.JobRuntime`` read from the
status file it publishes (``engine/runtime/control/status.py``, a ``view.JobStatus``), the
admin operations asked over its control channel (``engine/runtime/control/admin.py``).

A status file older than ``stale_after_s`` (12 missed publications by default) means the job
manager is gone or stuck: the job is then reported as ``unknown`` and ``/health`` as degraded,
and live reads answer 503 (``live_problem``): the state files are no longer live. Committed
reads go on, from the checkpoints. A job whose last status says it
ended (stopped, cancelled, finished and exited) or failed stays so however old that status is:
its job manager said so (``JobStatus.seen_state``). A new
``weir run`` of the job (a new run id) or a restart (a new generation) makes the readers reopen.
A file this weir cannot read (another version's) is a status problem that names the mismatch.

With a ``LeaderWatch`` (``weir api`` always has one) it follows the job's leader: the status and
the workers' state are read from the state directory the lease names, so a failover to a job
manager with another state directory is followed without a restart. While no leader vouches for
the state (the lease expired, the new leader has not published yet, its directory is not on this
host, or the status is stale) ``live_problem`` says why, and live reads answer 503 with it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from weir.api.leader import LeaderWatch
from weir.base.errors import ControlError, MessageError
from weir.engine.job import Job
from weir.engine.runtime.control import admin, status
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.view import (
    BackfillEntry,
    CheckpointSummary,
    JobStatus,
    SavepointResult,
    operator_watermark,
)
from weir.engine.runtime.wire import from_plain, to_plain
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange

log = logging.getLogger(__name__)

STALE_AFTER_S = status.STALE_AFTER_S
REFRESH_S = 0.05


class RemoteRuntime:
    """``JobRuntime`` from ``<job_dir>/jobmanager.json``, re-read at most every ``REFRESH_S``
    and only when the file changed."""

    def __init__(
        self,
        job: Job,
        job_dir: Path,
        storage: CheckpointStorage,
        stale_after_s: float = STALE_AFTER_S,
        leader: LeaderWatch | None = None,
    ) -> None:
        self.job = job
        self.home = job_dir  # this API's own: where it looks when no lease names another
        self.job_dir = job_dir  # where the leader's status and state are (followed)
        self.storage = storage
        self.stale_after_s = stale_after_s
        self.leader = leader
        self._path = status.status_path(job_dir)
        self._body: JobStatus | None = None
        self._unreadable: str | None = None  # why the file on disk cannot be read
        self._file: tuple[int, int, int] | None = None
        self._read_at = float("-inf")
        self._endpoints: tuple[int, PeerAuth, list[str | None]] | None = None
        self._endpoints_lock = threading.Lock()
        self._run: tuple[str, int] | None = None
        self._generation = 0
        self._state_here = True  # the leader's state directory is on this host
        self._lock = threading.Lock()

    def _status(self) -> JobStatus | None:
        if time.monotonic() - self._read_at < REFRESH_S:
            return self._body
        with self._lock:
            self._read()
            # stamped once the read is done: a caller that finds the stamp recent finds what
            # the read found, and one that comes during a read waits for it on the lock
            self._read_at = time.monotonic()
            return self._body

    def _read(self) -> None:
        self._follow_leader()
        try:
            st = os.stat(self._path)
        except OSError:
            return
        seen = (st.st_mtime_ns, st.st_size, st.st_ino)
        if seen == self._file:
            return
        try:
            body = status.read_status(self._path)
        except MessageError as exc:
            self._file, self._unreadable = seen, str(exc)
            return
        if body is not None:
            self._file, self._body, self._unreadable = seen, body, None
            run = (body.run_id, body.generation)
            if run != self._run:  # a new run or a restart: the state files were rebuilt
                self._run = run
                self._generation += 1

    def _follow_leader(self) -> None:
        """Look where the lease says the leader keeps its state: a new directory forgets the
        status read from the old one."""
        record = None if self.leader is None else self.leader.leader.record
        job_dir = self.home if record is None else Path(record.holder.state_dir) / self.job.name
        if job_dir != self.job_dir:
            log.info("api: job=%s follows its leader's state in %s", self.job.name, job_dir)
            self.job_dir, self._path = job_dir, status.status_path(job_dir)
            self._file, self._body, self._unreadable = None, None, None
        # looked at on each read (at most every REFRESH_S), not on each request
        self._state_here = record is None or self._holds_lock_here(record.holder.lock)

    def worker_state_path(self, index: int) -> Path:
        """Worker ``index``'s RocksDB in the leader's state directory."""
        self._status()
        return self.job_dir / f"worker-{index}" / "db"

    @property
    def leader_problem(self) -> str | None:
        """Why no leader vouches for the state this API can read (None: one does, or the job
        never took a lease)."""
        if self.leader is None:
            return None
        body = self._status()
        if body is not None and (body.ended or body.state == "failed"):
            record = self.leader.leader.record
            if record is None or record.holder.run == body.run_id:
                return None  # the leader said how the job ended: its lease need not live on
        run = None if body is None else body.run_id
        return self.leader.problem(run, self._state_here, self._path)

    @property
    def forward_to(self) -> str | None:
        """The API of a leader whose state is on another host, as its lease publishes it
        (None: the leader's state is here, it publishes no API, or no leader holds the lease);
        ``api.forward`` sends requests there."""
        if self.leader is None:
            return None
        lead = self.leader.leader
        record = lead.record
        if record is None or lead.expired or record.holder.api is None:
            return None
        self._status()  # follows the lease to the leader's directory
        return None if self._state_here else record.holder.api

    def _holds_lock_here(self, lock: str) -> bool:
        """The leader's state directory is the one this host sees at its path: its run lock
        has the device and inode the lease names (another host's directory of the same path
        is not)."""
        try:
            st = (self.job_dir / "run.lock").stat()
        except OSError:
            return False
        return f"{st.st_dev}:{st.st_ino}" == lock

    @property
    def live_problem(self) -> str | None:
        """Why a live read would not be live (None: it would): no leader vouches for the state
        here, or its status is older than ``stale_after_s`` while the job has not ended."""
        problem = self.leader_problem
        if problem is not None:
            return problem
        body = self._status()
        if body is None or body.ended or body.state == "failed":
            return None  # none yet (readers say so), or final: what the job left
        age = self._age_s(body)
        if age > self.stale_after_s:
            return (
                f"the job manager's status ({self._path}) is {age:.1f} s old, so its state is "
                "not live; is weir run still running?"
            )
        return None

    # -- view.JobRuntime -----------------------------------------------------------------------

    @property
    def parallelism(self) -> int:
        body = self._status()
        return 0 if body is None else body.parallelism

    @property
    def ranges(self) -> list[KeyGroupRange]:
        body = self._status()
        return [] if body is None else [KeyGroupRange(lo, hi) for lo, hi in body.ranges]

    @property
    def generation(self) -> int:
        self._status()
        return self._generation

    @property
    def source(self) -> str:
        body = self._status()
        return self.job.describe_sources() if body is None else body.source

    @property
    def last_checkpoint(self) -> int | None:
        body = self._status()
        return None if body is None else body.last_checkpoint

    @property
    def completed_checkpoints(self) -> int:
        body = self._status()
        return 0 if body is None else body.completed_checkpoints

    @property
    def checkpoints(self) -> list[CheckpointSummary]:
        body = self._status()
        return [] if body is None else body.checkpoints

    @property
    def checkpoint_problem(self) -> str | None:
        body = self._status()
        return None if body is None else body.checkpoint_problem

    @property
    def restarts(self) -> int:
        body = self._status()
        return 0 if body is None else body.restarts

    @property
    def restored_from(self) -> str | None:
        body = self._status()
        return None if body is None else body.restored_from

    @property
    def backfills(self) -> list[BackfillEntry]:
        body = self._status()
        return [] if body is None else body.backfills

    def worker_status(self) -> list[WorkerStatus]:
        body = self._status()
        return [] if body is None else body.workers

    def operator_watermark(self, op: str) -> int:
        return operator_watermark(self.worker_status(), op)

    def state_watermark(self, op: str) -> int:
        return operator_watermark(self.worker_status(), op, "state_watermark")

    def state(self) -> str:
        body = self._status()
        return "unknown" if body is None else body.seen_state(now_ms(), self.stale_after_s)

    @property
    def status_problem(self) -> str | None:
        """Why this API cannot vouch for the job (None when it can)."""
        body = self._status()
        leader = self.leader_problem
        if leader is not None:
            return leader
        if self._unreadable is not None:
            return f"cannot read the job manager's status {self._path}: {self._unreadable}"
        if body is None:
            return (
                f"no status from the job manager yet ({self._path} is missing); start the job "
                "with weir run and the same --state-dir"
            )
        if body.ended:
            return f"the job was {body.state}"
        age = self._age_s(body)
        if age > self.stale_after_s:
            return (
                f"the job manager's status ({self._path}) is {age:.1f} s old; is weir run "
                "still running?"
            )
        if body.operators != sorted(self.job.operators):
            return (
                f"the running job has operators {body.operators}, this job file "
                f"{sorted(self.job.operators)}; serve the file weir run runs"
            )
        return None

    @property
    def failure_reason(self) -> str | None:
        body = self._status()
        return None if body is None else body.failure

    @property
    def dead_letter_problem(self) -> str | None:
        body = self._status()
        return None if body is None else body.dead_letter_problem

    @property
    def state_retention_ms(self) -> int:
        body = self._status()
        return 0 if body is None else body.state_retention_ms

    @staticmethod
    def _age_s(body: JobStatus) -> float:
        return (now_ms() - body.written_at) / 1000.0

    # -- admin operations, over the control channel ---------------------------------------------

    def _call(self, op: str, args: object, timeout_s: float) -> dict[str, Any]:
        body = self._status()
        port = None if body is None else body.control_port
        if port is None or self.state() in ("unknown", "stopped", "cancelled"):
            raise ControlError(
                f"job {self.job.name!r} is not running "
                f"({self.status_problem or 'it publishes no control channel'}); nothing was done"
            )
        key = admin.read_key(self.job_dir)
        answer = admin.call(port, key, op, to_plain(args), timeout_s + 10)
        # the job manager published what it did before answering: the next read is of that
        self._read_at = float("-inf")
        return answer

    # -- a cluster job's live state, served by its tasks --------------------------------------

    @property
    def on_cluster(self) -> bool:
        body = self._status()
        return body is not None and body.cluster

    def state_endpoint(self, index: int) -> tuple[str | None, PeerAuth | None]:
        """Asked of the job manager over the control channel, once per generation (and again
        while a task has not said where it serves)."""
        with self._endpoints_lock:
            known = self._endpoints
            if known is None or known[0] != self.generation or known[2][index] is None:
                answer = self._call("state_endpoints", admin.CancelArgs(), 10.0)
                found = from_plain(admin.StateEndpoints, answer, "state endpoints")
                auth = PeerAuth(bytes.fromhex(found["secret"]), found["attempt"])
                known = self._endpoints = (self.generation, auth, found["addresses"])
        _, auth, addresses = known
        return (addresses[index] if index < len(addresses) else None), auth

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult:
        answer = self._call("savepoint", admin.SavepointArgs(timeout_s), timeout_s)
        return from_plain(SavepointResult, answer, "savepoint answer")

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry:
        answer = self._call("backfill", admin.BackfillArgs(req, timeout_s), timeout_s)
        return from_plain(BackfillEntry, answer, "backfill answer")


__all__ = ["RemoteRuntime"]
