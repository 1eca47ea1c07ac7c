"""Loading a backfill into the running workers: every worker first checks that it holds no
window in the backfill's range; only when none refuses do all of them ingest its SST files. The
rule: a backfill never touches a window the live job has, so nothing is counted twice.

An API thread calls ``ingest`` and waits; the workers' replies arrive on the job manager's
monitor thread (``reply``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weir.engine.errors import ConfigError
from weir.engine.paths import confined
from weir.engine.runtime.messages import (
    BackfillPhase,
    BackfillReply,
    BackfillRequest,
    BackfillStep,
    ToWorker,
)
from weir.engine.runtime.view import BackfillEntry
from weir.state.checkpoints import now_ms

log = logging.getLogger(__name__)

_FIX = "write backfills under the job's --backfill-dir (weir backfill --work-dir)"


class LiveBackfill:
    def __init__(
        self,
        job_name: str,
        backfill_dir: Path,
        parallelism: int,
        broadcast: Callable[[ToWorker], None],
        publish: Callable[[], None],
    ) -> None:
        self._job = job_name
        self._dir = backfill_dir
        self._parallelism = parallelism
        self._broadcast = broadcast
        self._publish = publish
        self.entries: list[BackfillEntry] = []  # loaded in this run
        self._lock = threading.Lock()
        self._waiting: dict[int, dict[int, BackfillReply]] = {}  # request id -> worker -> reply
        self._ids = 0

    def ingest(
        self,
        req: dict[str, Any],
        timeout_s: float,
        running: Callable[[], bool],
        stopping: threading.Event,
    ) -> BackfillEntry:
        """Check, then ingest, the SST files ``req`` names into every worker. The files must
        lie under ``--backfill-dir`` (``PathRefused`` otherwise: no ``..``, no symlink out),
        since the request names them."""
        request = BackfillRequest.from_request(req)
        path = confined(Path(request.path), self._dir, "backfill path", _FIX)
        files = sorted(path.glob("kg-*.sst")) if path.is_dir() else []
        for f in files:
            confined(f, self._dir, "backfill file", _FIX)
        if not files:
            raise ConfigError(f"{path} is not a directory of backfill SST files (kg-*.sst)")
        if not running():
            raise ConfigError(f"job {self._job!r} is not running; nothing was loaded")
        request = BackfillRequest(
            request.op, str(path), request.min_end, request.max_end, request.windows
        )
        for phase in (BackfillPhase.CHECK, BackfillPhase.INGEST):
            replies = self._ask(phase, request, timeout_s, stopping)
            refused = [r.error for r in replies if r.error is not None]
            if refused:
                raise ConfigError(f"backfill refused: {refused[0]}")
        entry: BackfillEntry = {
            "op": request.op,
            "min_end": request.min_end,
            "max_end": request.max_end,
            "windows": request.windows,
            "time": now_ms(),
        }
        self.entries.append(entry)
        self._publish()
        log.info("job=%s loaded backfill %s", self._job, entry)
        return entry

    def reply(self, worker: int, reply: BackfillReply) -> None:
        with self._lock:
            waiting = self._waiting.get(reply.request_id)
            if waiting is not None:
                waiting[worker] = reply

    def _ask(
        self,
        phase: BackfillPhase,
        request: BackfillRequest,
        timeout_s: float,
        stopping: threading.Event,
    ) -> list[BackfillReply]:
        with self._lock:
            self._ids += 1
            n = self._ids
            replies: dict[int, BackfillReply] = {}
            self._waiting[n] = replies
        try:
            self._broadcast(BackfillStep(n, phase, request))
            deadline = time.monotonic() + timeout_s
            while True:
                with self._lock:
                    if len(replies) >= self._parallelism:
                        return list(replies.values())
                if time.monotonic() > deadline or stopping.is_set():
                    raise ConfigError(
                        f"workers did not answer the backfill's {phase.value} in time"
                    )
                time.sleep(0.02)
        finally:
            with self._lock:
                self._waiting.pop(n, None)
