"""A worker's part of a checkpoint once every input is at its barrier (Flink's
``SubtaskCheckpointCoordinator``).

Synchronous part, while the loop waits: write the state memory holds and RocksDB does not yet
(at most a flush interval of changes), then a RocksDB checkpoint (a memtable flush, mostly done
already by the one started at the barrier, and hard links). Asynchronous part, in a thread: the
upload of the files that are new since the last *completed* checkpoint (file I/O and CRCs
release the GIL), then the acknowledgement. Files of a completed checkpoint are referenced by
the next one instead of being uploaded again.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from weir.engine.errors import WeirError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.messages import (
    CheckpointAck,
    CheckpointDecline,
    FromWorker,
    OperatorMarks,
    SplitPosition,
    WorkerSnapshot,
)
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange
from weir.state.rocksdb import RocksState

log = logging.getLogger(__name__)


class Snapshotter:
    def __init__(
        self,
        cfg: RunConfig,
        job_name: str,
        index: int,
        key_groups: KeyGroupRange,
        state: RocksState,
        send: Callable[[FromWorker], None],
        confirmed: dict[str, FileRef],
    ) -> None:
        self._cfg = cfg
        self._job = job_name
        self._index = index
        self._range = key_groups
        self._state = state
        self._send = send
        self.storage = CheckpointStorage(cfg.checkpoints_root, job_name)
        # remote storage: uploaded SST files are kept (hard links) for a local recovery
        self._cache = cfg.sst_cache_path(job_name) if self.storage.store.remote else None
        # SST files (by local name) a completed checkpoint holds: the next one references them
        self._confirmed = confirmed
        self._uploaded: dict[int, list[FileRef]] = {}
        self._positions: dict[int, dict[str, SplitPosition]] = {}
        self._upload: threading.Thread | None = None

    def begin(self, n: int, positions: dict[str, SplitPosition]) -> None:
        """Checkpoint ``n``'s barrier passed the source side at ``positions``."""
        self._positions[n] = positions
        self._state.flush(wait=False)  # RocksDB's own threads flush the memtable while we align

    def take(
        self, n: int, flush: Callable[[], None], marks: dict[str, OperatorMarks], records_in: int
    ) -> None:
        """Every input is at barrier ``n``: the synchronous part, then the upload thread. While
        an earlier upload still runs (storage slow or away: it retries, then fails), ``n`` is
        declined rather than waited for, so that processing never stops on storage."""
        if self._upload is not None and self._upload.is_alive():
            log.warning("worker=%d checkpoint=%d declined: an upload still runs", self._index, n)
            self._send(CheckpointDecline(n, "the previous checkpoint's upload is still running"))
            return
        t0 = time.perf_counter()
        flush()
        t1 = time.perf_counter()
        local = self._cfg.job_dir(self._job) / f"worker-{self._index}" / f"chk-{n}"
        shutil.rmtree(local, ignore_errors=True)
        try:
            self._state.checkpoint(local)
        except WeirError as exc:
            log.error("worker=%d checkpoint=%d failed: %s", self._index, n, exc)
            self._send(CheckpointDecline(n, str(exc)))
            return
        t2 = time.perf_counter()
        part = WorkerSnapshot(
            index=self._index,
            key_groups=(self._range.start, self._range.end),
            sources=self._positions[n],
            operators=marks,
            records_in=records_in,
            flush_ms=round((t1 - t0) * 1000, 3),
            rocksdb_ms=round((t2 - t1) * 1000, 3),
            sync_ms=round((t2 - t0) * 1000, 3),
            files=(),
            size=0,
            incremental_size=0,
            async_ms=0.0,
        )
        self._upload = threading.Thread(
            target=self._upload_snapshot,
            args=(n, local, part),
            name=f"weir-upload-{n}",
            daemon=True,
        )
        self._upload.start()

    def _upload_snapshot(self, n: int, local: Path, part: WorkerSnapshot) -> None:
        """``part``: the synchronous part's figures; the files and sizes are added here."""
        t0 = time.perf_counter()
        try:
            files, copied = self.storage.upload(
                local,
                n,
                self._index,
                f"{self._cfg.run_id}-w{self._index}",
                dict(self._confirmed),
                self._cache,
            )
        except Exception as exc:  # noqa: BLE001 - a failed upload fails this checkpoint only
            log.error("worker=%d checkpoint=%d upload failed: %s", self._index, n, exc)
            self._send(CheckpointDecline(n, f"upload failed: {type(exc).__name__}: {exc}"))
            return
        finally:
            shutil.rmtree(local, ignore_errors=True)
        self._uploaded[n] = files
        snapshot = replace(
            part,
            files=tuple(files),
            size=sum(f.size for f in files),
            incremental_size=copied,
            async_ms=round((time.perf_counter() - t0) * 1000, 3),
        )
        self._send(CheckpointAck(n, snapshot))

    def completed(self, n: int) -> dict[str, SplitPosition]:
        """The job manager wrote checkpoint ``n``'s metadata: its files are what the next
        checkpoint can reference instead of uploading. Returns where the splits were."""
        files = self._uploaded.pop(n, None)
        if files is not None:
            self._confirmed = {f.name: f for f in files if f.shared is not None}
        for old in [k for k in self._uploaded if k < n]:
            del self._uploaded[old]
        positions = self._positions.pop(n, {})
        for old in [k for k in self._positions if k < n]:
            del self._positions[old]
        return positions

    def join(self, timeout_s: float | None = None) -> None:
        if self._upload is not None:
            self._upload.join(timeout_s)
