"""The job manager's status in a file, for API processes that run apart from it (``weir api``).

Everything ``api.registry.JobRuntime`` reads goes into ``<state-dir>/<job>/jobmanager.json``,
written atomically (a temporary name, then a rename, so a reader never sees half a file) every
``PERIOD_S`` and within ``WATCH_S`` of a change that matters (state, generation, checkpoint,
restarts, backfills); the job manager also publishes at once when a checkpoint completes or the
job restarts. ``written_at`` tells a reader how old it is: a file that stops changing means the
job manager is gone.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from weir.engine.watermarks import MIN_WATERMARK
from weir.state.checkpoints import now_ms

if TYPE_CHECKING:
    from weir.engine.runtime.jobmanager import JobManager

log = logging.getLogger(__name__)

STATUS_FILE = "jobmanager.json"
FORMAT = 1
PERIOD_S = 0.25
WATCH_S = 0.05
RECENT_CHECKPOINTS = 10
_WATCHED = ("state", "generation", "last_checkpoint", "restarts", "checkpoint_problem")


def status_path(job_dir: Path) -> Path:
    return job_dir / STATUS_FILE


def write_status(path: Path, body: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS))
    os.replace(tmp, path)


def read_status(path: Path) -> dict[str, Any] | None:
    """The published status, or None when there is none (yet) or it cannot be read."""
    try:
        body = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return body if isinstance(body, dict) and body.get("format") == FORMAT else None


def operator_watermark(workers: list[dict[str, Any]], op: str) -> int:
    """An operator's watermark: the minimum over its workers (MIN until all reported)."""
    marks = []
    for st in workers:
        ops = st.get("operators", {})
        if op not in ops:
            return MIN_WATERMARK
        marks.append(ops[op]["watermark"])
    return min(marks) if marks else MIN_WATERMARK


def snapshot(manager: JobManager, control_port: int | None) -> dict[str, Any]:
    """What an API process needs of ``manager``: ``JobRuntime``'s fields and a little more."""
    return {
        "format": FORMAT,
        "job": manager.job.name,
        "run_id": manager.cfg.run_id,
        "pid": os.getpid(),
        "written_at": now_ms(),
        "state": manager.state(),
        "failure": str(manager.failure) if manager.failure is not None else None,
        "source": manager.job.sources[0].source.describe(),
        "operators": sorted(manager.job.operators),
        "parallelism": manager.parallelism,
        "max_parallelism": manager.job.max_parallelism,
        "ranges": [r.to_json() for r in manager.ranges],
        "generation": manager.generation,
        "restarts": manager.restarts,
        "last_checkpoint": manager.last_checkpoint,
        "completed_checkpoints": manager.completed_checkpoints,
        "checkpoints": manager.checkpoints[-RECENT_CHECKPOINTS:],
        "checkpoint_problem": manager.checkpoint_problem,
        "restored_from": str(manager.restored_from) if manager.restored_from else None,
        "backfills": list(manager.backfills),
        "workers": manager.worker_status(),
        "control_port": control_port,
    }


class StatusPublisher:
    """A thread that writes ``snapshot()`` to ``path`` every ``PERIOD_S`` and soon after a
    watched field changes; ``publish()`` writes at once, from any thread."""

    def __init__(self, path: Path, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.path = path
        self._snapshot = snapshot
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple[Any, ...] = ()
        self._failed = False

    def start(self) -> None:
        self.publish()
        self._thread = threading.Thread(target=self._loop, name="weir-status", daemon=True)
        self._thread.start()

    def publish(self, **final: Any) -> dict[str, Any]:
        with self._lock:
            body = {**self._snapshot(), **final}
            self._last = tuple(body.get(k) for k in _WATCHED) + (len(body["backfills"]),)
            try:
                write_status(self.path, body)
                self._failed = False
            except OSError as exc:  # the job goes on; API processes will call it stale
                if not self._failed:
                    log.error("cannot write the job's status file %s: %s", self.path, exc)
                self._failed = True
            return body

    def stop(self, **final: Any) -> None:
        """Stop the thread and write a last status (``final`` overrides fields)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        self.publish(**final)

    def _loop(self) -> None:
        due = time.monotonic() + PERIOD_S
        while not self._stop.wait(WATCH_S):
            try:
                if time.monotonic() >= due:
                    self.publish()
                    due = time.monotonic() + PERIOD_S
                    continue
                body = self._snapshot()
                watched = tuple(body.get(k) for k in _WATCHED) + (len(body["backfills"]),)
                if watched != self._last:
                    self.publish()
                    due = time.monotonic() + PERIOD_S
            except Exception:  # noqa: BLE001 - publishing must never take the job down
                log.exception("status publisher error; retrying")


__all__ = [
    "STATUS_FILE",
    "StatusPublisher",
    "operator_watermark",
    "read_status",
    "snapshot",
    "status_path",
]
