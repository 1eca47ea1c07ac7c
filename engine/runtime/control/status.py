"""The job manager's status in a file, for API processes that run apart from it (``weir api``).

Everything ``view.JobRuntime`` answers goes into ``<state-dir>/<job>/jobmanager.json`` as a
``view.JobStatus``, written atomically (a temporary name, then a rename, so a reader never sees
half a file) every ``PERIOD_S``, and at once after a change that matters (state, generation,
checkpoint, restarts, backfills): the job manager publishes when a checkpoint completes or the
job restarts, and pokes the publisher when the job's state may have changed (its thread wakes
for that and for its period, not on a clock of its own). ``written_at`` tells a reader how old
it is: a file that stops changing (older than ``STALE_AFTER_S``) means the job manager is gone,
unless its last publication said the job ended (``ended``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from pathlib import Path

from weir.base.files import write_private
from weir.engine.job import Job
from weir.engine.runtime.view import STATUS_FORMAT, ClusterRuntime, JobRuntime, JobStatus
from weir.state.checkpoints import now_ms

log = logging.getLogger(__name__)

STATUS_FILE = "jobmanager.json"
PERIOD_S = 0.25
RECENT_CHECKPOINTS = 10
STALE_AFTER_S = 3.0  # 12 missed publications: the job manager is gone or stuck


def status_path(job_dir: Path) -> Path:
    return job_dir / STATUS_FILE


def write_status(path: Path, status: JobStatus) -> None:
    """Atomically, and readable by the user only: it names the run and its control port."""
    write_private(path, status.to_json())


def read_status(path: Path) -> JobStatus | None:
    """The published status; None when there is none (yet) or it cannot be read.
    ``MessageError`` when the file is not a status this weir can read."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    return JobStatus.from_json(raw)


def job_status(
    runtime: JobRuntime,
    job: Job,
    run_id: str,
    control_port: int | None,
    api_url: str | None = None,
    ended: bool = False,
) -> JobStatus:
    """What ``jobmanager.json`` holds: everything ``runtime`` answers, as of now."""
    return JobStatus(
        format=STATUS_FORMAT,
        job=job.name,
        run_id=run_id,
        pid=os.getpid(),
        written_at=now_ms(),
        state=runtime.state(),
        failure=runtime.failure_reason,
        dead_letter_problem=runtime.dead_letter_problem,
        state_retention_ms=runtime.state_retention_ms,
        source=runtime.source,
        operators=sorted(job.operators),
        parallelism=runtime.parallelism,
        max_parallelism=job.max_parallelism,
        ranges=[(r.start, r.end) for r in runtime.ranges],
        generation=runtime.generation,
        restarts=runtime.restarts,
        last_checkpoint=runtime.last_checkpoint,
        completed_checkpoints=runtime.completed_checkpoints,
        checkpoints=runtime.checkpoints[-RECENT_CHECKPOINTS:],
        checkpoint_problem=runtime.checkpoint_problem,
        restored_from=runtime.restored_from,
        backfills=list(runtime.backfills),
        workers=runtime.worker_status(),
        control_port=control_port,
        api_url=api_url,
        cluster=isinstance(runtime, ClusterRuntime) and runtime.on_cluster,
        ended=ended,
    )


def _watched(status: JobStatus) -> tuple[Hashable, ...]:
    return (
        status.state,
        status.ended,
        status.api_url,
        status.generation,
        status.last_checkpoint,
        status.restarts,
        status.checkpoint_problem,
        len(status.backfills),
    )


class StatusPublisher:
    """A thread that writes ``snapshot()`` to ``path`` every ``PERIOD_S`` and, once ``poke``d,
    at once if a watched field changed; ``publish()`` writes at once, from any thread."""

    def __init__(self, path: Path, snapshot: Callable[[], JobStatus]) -> None:
        self.path = path
        self._snapshot = snapshot
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._news = threading.Event()  # poked, or stopping: the thread looks at once
        self._thread: threading.Thread | None = None
        self._last: tuple[Hashable, ...] = ()
        self._failed = False
        self._error: str | None = None  # the loop's last error, logged once

    def start(self) -> None:
        self.publish()
        self._thread = threading.Thread(target=self._loop, name="weir-status", daemon=True)
        self._thread.start()

    def publish(self, final_state: str | None = None) -> JobStatus:
        with self._lock:
            status = self._snapshot()
            if final_state is not None:
                status = replace(status, state=final_state)
            self._last = _watched(status)
            try:
                write_status(self.path, status)
                self._failed = False
            except OSError as exc:  # the job goes on; API processes will call it stale
                if not self._failed:
                    log.error("cannot write the job's status file %s: %s", self.path, exc)
                self._failed = True
            return status

    def stop(self, final_state: str) -> None:
        """Stop the thread and write a last status, in state ``final_state``."""
        self._stop.set()
        self._news.set()
        if self._thread is not None:
            self._thread.join(2.0)
        self.publish(final_state)

    def poke(self) -> None:
        """A watched field may have changed: the thread looks now (and publishes if one did),
        not at its next period."""
        self._news.set()

    def _loop(self) -> None:
        due = time.monotonic() + PERIOD_S
        while True:
            self._news.wait(max(0.0, due - time.monotonic()))
            self._news.clear()
            if self._stop.is_set():
                return
            try:
                if time.monotonic() >= due or _watched(self._snapshot()) != self._last:
                    self.publish()
                    due = time.monotonic() + PERIOD_S
                    self._error = None
            except Exception as exc:  # noqa: BLE001 - publishing must never take the job down
                if repr(exc) != self._error:  # once per distinct error, not every period
                    log.exception("status publisher error; retrying")
                self._error = repr(exc)


__all__ = [
    "STALE_AFTER_S",
    "STATUS_FILE",
    "StatusPublisher",
    "job_status",
    "read_status",
    "status_path",
    "write_status",
]
