"""Loading a backfill into the running workers: every worker first checks its files entry by
entry and that it holds no window in the backfill's range (``task/ingest.py``); only when none
refuses do all of them ingest the checked copies. The rule: a backfill never touches a window
the live job has, so nothing is counted twice.

A checkpoint holds a backfill on every worker or on none: no checkpoint begins while the
workers ingest, and the ingest waits for one in flight to complete or fail (``CheckpointGate``,
the coordinator). Otherwise a barrier could fall between one worker's ingest and another's.

An API thread calls ``ingest`` and waits; the workers' replies arrive on the job manager's
monitor thread (``reply``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from weir.base.errors import ConfigError, PathRefused, StateError
from weir.base.paths import confined
from weir.base.settings import named
from weir.engine.runtime.messages import (
    BackfillFile,
    BackfillPhase,
    BackfillReply,
    BackfillRequest,
    BackfillStep,
    ToWorker,
)
from weir.engine.runtime.view import BackfillEntry
from weir.state import untrusted
from weir.state.checkpoints import now_ms
from weir.state.objectstore import StorageLocation, open_store, storage_location

log = logging.getLogger(__name__)

_FIX = "write backfills under the job's `backfill_dir` (weir backfill `work_dir`)"


class CheckpointGate(Protocol):
    def hold(self, timeout_s: float, stopping: threading.Event) -> None:
        """No checkpoint begins until ``release``; returns once none is in flight."""

    def release(self) -> None: ...


class LiveBackfill:
    def __init__(
        self,
        job_name: str,
        backfill_dir: Path | str,
        parallelism: int,
        max_parallelism: int,
        broadcast: Callable[[ToWorker], None],
        publish: Callable[[], None],
        gate: CheckpointGate,
    ) -> None:
        self._job = job_name
        self._root = storage_location(backfill_dir, named("backfill_dir"))
        self._parallelism = parallelism
        self._max_parallelism = max_parallelism
        self._gate = gate
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
        lie under ``--backfill-dir`` (``PathRefused`` otherwise), since the request names
        them; in object storage each worker downloads those of its key groups."""
        request = BackfillRequest.from_request(req)
        where = self._confine(request.path)
        files = self._listed(where)
        for f in files:
            self._check_name(f"{where.url}/{f.name}")
        if not files:
            raise ConfigError(f"{where.url} is not a directory of backfill SST files (kg-*.sst)")
        if not running():
            raise ConfigError(f"job {self._job!r} is not running; nothing was loaded")
        # the workers open these and nothing else: they never list the directory again
        root = "" if self._root.path is None else str(self._root.path.resolve())
        request = BackfillRequest(
            request.op, where.url, request.min_end, request.max_end, request.windows,
            root, tuple(files),
        )  # fmt: skip
        checked = self._ask(BackfillPhase.CHECK, request, timeout_s, running, stopping)
        self._gate.hold(timeout_s, stopping)
        try:
            self._ask(BackfillPhase.INGEST, request, timeout_s, running, stopping)
        finally:
            self._gate.release()
        ends = [e for r in checked for e in (r.min_end, r.max_end) if e is not None]
        entry: BackfillEntry = {
            "op": request.op,
            # what the files held, not what the request said
            "min_end": min(ends, default=request.min_end),
            "max_end": max(ends, default=request.max_end),
            "windows": request.windows,
            "time": now_ms(),
        }
        self.entries.append(entry)
        self._publish()
        log.info("job=%s loaded backfill %s", self._job, entry)
        return entry

    def _confine(self, raw: str) -> StorageLocation:
        """Where ``raw`` (the request's path or URL) names, refused (``PathRefused``, naming
        both) unless it lies under the job's backfill storage: a directory by ``confined``
        (no ``..``, no symlink out), a bucket by prefix, segment by segment."""
        try:
            where = storage_location(raw, "backfill path")
        except ConfigError as exc:
            raise PathRefused(f"{exc}; {_FIX}") from None
        root = self._root
        if where.scheme != root.scheme:
            raise PathRefused(
                f"backfill path {raw!r} is not under the job's backfill storage {root.url}; {_FIX}"
            )
        if root.path is not None:
            assert where.path is not None
            return StorageLocation("file", path=confined(where.path, root.path, "backfill path",
                                                         _FIX))  # fmt: skip
        parts = where.prefix.split("/")
        base = [p for p in root.prefix.split("/") if p]
        if (
            where.bucket != root.bucket
            or any(p in ("", ".", "..") for p in parts)
            or parts[: len(base)] != base
        ):
            raise PathRefused(
                f"backfill path {raw!r} is not under the job's backfill storage {root.url}; {_FIX}"
            )
        return where

    def _listed(self, where: StorageLocation) -> list[BackfillFile]:
        """The backfill files at ``where``, with their sizes. In a directory each must be a
        regular file, reached from the backfill storage without a symlink (``untrusted``:
        opened with ``O_NOFOLLOW | O_NONBLOCK`` and judged by ``fstat``); in a bucket each must
        be in the manifest and the manifest's files there."""
        # the bulk load's modules load with the first backfill, not with every job manager
        from weir.state.bulkload import BACKFILL_GLOB
        from weir.state.bulkstore import MANIFEST, read_manifest, stored_files

        if where.path is not None:
            assert self._root.path is not None
            if not where.path.is_dir():
                return []
            try:
                with untrusted.open_dir(self._root.path.resolve(), where.path) as d:
                    found = untrusted.regular_files(d, BACKFILL_GLOB, str(where.path))
            except StateError as exc:  # a symlink, a FIFO, a device: a path weir refuses
                raise PathRefused(str(exc)) from None
            return [BackfillFile(name, size) for name, size in found]
        stored = stored_files(where)
        listed = read_manifest(open_store(where)) if stored else {}
        for name in sorted(set(stored) ^ set(listed)):
            state = "is not listed in" if name in stored else "is missing, though listed in"
            raise ConfigError(
                f"backfill file {where.url}/{name} {state} {where.url}/{MANIFEST}; write the "
                "backfill again with weir backfill"
            )
        return [BackfillFile(name, listed[name].size) for name in stored]

    def _check_name(self, f: str) -> None:
        """A file no worker would pick up is refused, not silently left out."""
        from weir.state.bulkload import key_group_of

        kg = key_group_of(f)
        if kg is None or kg >= self._max_parallelism:
            raise ConfigError(
                f"backfill file {f} does not name a key group of job {self._job!r} (kg-<n>.sst, "
                f"n below its max_parallelism {self._max_parallelism}); remove it, or backfill "
                "with this job's file"
            )

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
        running: Callable[[], bool],
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
                        answers = [replies[i] for i in sorted(replies)]
                        refused = [r.error for r in answers if r.error is not None]
                        if refused:
                            raise ConfigError(f"backfill refused: {refused[0]}")
                        return answers
                if not running():
                    raise ConfigError(
                        f"the job restarted or stopped during the backfill's {phase.value}; its "
                        "state is as of a checkpoint that holds none of it: load it again"
                    )
                if time.monotonic() > deadline or stopping.is_set():
                    raise ConfigError(
                        f"workers did not answer the backfill's {phase.value} in time"
                    )
                time.sleep(0.02)
        finally:
            with self._lock:
                self._waiting.pop(n, None)
