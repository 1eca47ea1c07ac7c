"""A job manager in another process, seen by ``weir api``: ``JobRuntime`` read from the status
file it publishes (``engine/runtime/status.py``), the admin operations asked over its control
channel (``engine/runtime/control.py``).

A status file older than ``stale_after_s`` (12 missed publications by default) means the job
manager is gone or stuck: the job is then reported as ``unknown`` and ``/health`` as degraded,
while queries go on answering from the state files as they are. A job whose last status says it
failed stays ``failed`` however old that status is: its job manager stopped for good. A new
``weir run`` of the job (a new run id) or a restart (a new generation) makes the readers reopen.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from weir.engine.errors import ConfigError
from weir.engine.job import Job
from weir.engine.runtime import control, status
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange

STALE_AFTER_S = 3.0
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
    ) -> None:
        self.job = job
        self.job_dir = job_dir
        self.storage = storage
        self.stale_after_s = stale_after_s
        self._path = status.status_path(job_dir)
        self._body: dict[str, Any] = {}
        self._file: tuple[int, int, int] | None = None
        self._read_at = float("-inf")
        self._run: tuple[Any, Any] | None = None
        self._generation = 0
        self._lock = threading.Lock()

    def _status(self) -> dict[str, Any]:
        if time.monotonic() - self._read_at < REFRESH_S:
            return self._body
        with self._lock:
            self._read_at = time.monotonic()
            try:
                st = os.stat(self._path)
            except OSError:
                return self._body
            seen = (st.st_mtime_ns, st.st_size, st.st_ino)
            if seen != self._file:
                body = status.read_status(self._path)
                if body is not None:
                    self._file, self._body = seen, body
                    run = (body.get("run_id"), body.get("generation"))
                    if run != self._run:  # a new run or a restart: the state files were rebuilt
                        self._run = run
                        self._generation += 1
            return self._body

    # -- JobRuntime ----------------------------------------------------------------------------

    @property
    def parallelism(self) -> int:
        return int(self._status().get("parallelism", 0))

    @property
    def ranges(self) -> list[KeyGroupRange]:
        return [KeyGroupRange(int(lo), int(hi)) for lo, hi in self._status().get("ranges", [])]

    @property
    def generation(self) -> int:
        self._status()
        return self._generation

    @property
    def last_checkpoint(self) -> int | None:
        n = self._status().get("last_checkpoint")
        return None if n is None else int(n)

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._status().get("checkpoints", [])
        return found

    def worker_status(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._status().get("workers", [])
        return found

    def operator_watermark(self, op: str) -> int:
        return status.operator_watermark(self.worker_status(), op)

    def state(self) -> str:
        body = self._status()
        if body.get("state") == "failed":  # the job manager's last word: it stays failed
            return "failed"
        if not body or self._age_s(body) > self.stale_after_s:
            return "unknown"
        return str(body.get("state", "unknown"))

    # -- what /health, /jobs/{job} and /metrics read when present -------------------------------

    @property
    def status_problem(self) -> str | None:
        """Why this API cannot vouch for the job (None when it can)."""
        body = self._status()
        if not body:
            return (
                f"no status from the job manager yet ({self._path} is missing); start the job "
                "with weir run and the same --state-dir"
            )
        age = self._age_s(body)
        if age > self.stale_after_s:
            return (
                f"the job manager's status ({self._path}) is {age:.1f} s old; is weir run "
                "still running?"
            )
        if body.get("state") == "stopped":
            return "the job was stopped"
        running = body.get("operators")
        if running is not None and running != sorted(self.job.operators):
            return (
                f"the running job has operators {running}, this job file "
                f"{sorted(self.job.operators)}; serve the file weir run runs"
            )
        return None

    @property
    def failure(self) -> str | None:
        found = self._status().get("failure")
        return None if found is None else str(found)

    @property
    def checkpoint_problem(self) -> str | None:
        problem = self._status().get("checkpoint_problem")
        return None if problem is None else str(problem)

    @property
    def completed_checkpoints(self) -> int:
        return int(self._status().get("completed_checkpoints", 0))

    @property
    def restarts(self) -> int:
        return int(self._status().get("restarts", 0))

    @property
    def backfills(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._status().get("backfills", [])
        return found

    @property
    def restored_from(self) -> str | None:
        found = self._status().get("restored_from")
        return None if found is None else str(found)

    @property
    def source(self) -> str | None:
        found = self._status().get("source")
        return None if found is None else str(found)

    @staticmethod
    def _age_s(body: dict[str, Any]) -> float:
        return (now_ms() - int(body.get("written_at", 0))) / 1000.0

    # -- admin operations, over the control channel ---------------------------------------------

    def _call(self, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        port = self._status().get("control_port")
        if port is None or self.state() in ("unknown", "stopped"):
            raise ConfigError(
                f"job {self.job.name!r} is not running "
                f"({self.status_problem or 'it publishes no control channel'}); nothing was done"
            )
        return control.call(int(port), control.read_key(self.job_dir), op, args, timeout_s + 10)

    def trigger_savepoint(self, timeout_s: float = 60.0) -> dict[str, Any]:
        return self._call("savepoint", {"timeout_s": timeout_s}, timeout_s)

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
        return self._call("backfill", {"req": req, "timeout_s": timeout_s}, timeout_s)


__all__ = ["RemoteRuntime"]
