"""A worker's part of a checkpoint once every input is at its barrier (Flink's
``SubtaskCheckpointCoordinator``).

Synchronous part, while the loop waits: each operator freezes what RocksDB lacks as one
generation (``operators/delta.py``: references and copied slots, no encoding, no RocksDB call),
and the side outputs are flushed. Asynchronous part, in a thread, as Flink's heap backend does
it: the frozen generations are written to RocksDB, RocksDB's checkpoint is taken (a memtable
flush and hard links), then the files new since the last *completed* checkpoint are uploaded
(file I/O and CRCs release the GIL) and the checkpoint acknowledged.

Exactly-once: from the barrier until RocksDB's checkpoint is taken (``writing``), the worker
writes nothing to RocksDB; operators go on in memory, which stays authoritative, and their next
flush writes the newer generation after the checkpoint. A checkpoint that fails or is declined
after the barrier still writes its generations: they are the operators' only record of those
changes. At most two generations exist: the frozen one and the live one, since a barrier that
arrives while the previous checkpoint's thread runs is declined (the coordinator triggers the
next one, and retries a stop's final one).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from weir.engine.errors import WeirError, WorkerFailed
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.messages import (
    CheckpointAck,
    CheckpointDecline,
    FromWorker,
    OperatorMarks,
    SplitPosition,
    WorkerSnapshot,
)
from weir.engine.runtime.operators.delta import StateDelta
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
        self._upload: threading.Thread | None = None  # the checkpoint's thread
        self._written = threading.Event()  # set: no checkpoint is writing to RocksDB
        self._written.set()
        self.failure: WorkerFailed | None = None  # a checkpoint thread could not write state

    def begin(self, n: int, positions: dict[str, SplitPosition]) -> None:
        """Checkpoint ``n``'s barrier passed the source side at ``positions``."""
        self._positions[n] = positions
        self._state.flush(wait=False)  # RocksDB's own threads flush the memtable while we align

    @property
    def writing(self) -> bool:
        """Is a checkpoint's thread still writing its generations or taking RocksDB's
        checkpoint? Until it is done, the worker's own RocksDB writes wait."""
        return not self._written.is_set()

    def when_written(self, write: Callable[[], None]) -> bool:
        """Run ``write`` (a flush of the operators) unless a checkpoint is still being written
        (then the next flush does it); False when it did not run."""
        self.check()
        if self.writing:
            return False
        write()
        return True

    def wait_written(self, timeout_s: float | None = None) -> bool:
        """Block until no checkpoint is being written (before the end of input's flush, a
        backfill's ingest, the close); False on timeout."""
        return self._written.wait(timeout_s)

    def check(self) -> None:
        """A checkpoint's thread that could not write the state fails the worker."""
        if self.failure is not None:
            raise self.failure

    def take(
        self,
        n: int,
        freeze: Callable[[], list[StateDelta]],
        marks: dict[str, OperatorMarks],
        records_in: int,
    ) -> None:
        """Every input is at barrier ``n``: the synchronous part (``freeze``), then the thread.
        While an earlier checkpoint's thread still runs (state being written, or storage slow
        or away: it retries, then fails), ``n`` is declined rather than waited for, so that
        processing never stops on storage."""
        if self._upload is not None and self._upload.is_alive():
            log.warning("worker=%d checkpoint=%d declined: an upload still runs", self._index, n)
            self._send(CheckpointDecline(n, "the previous checkpoint's upload is still running"))
            return
        t0 = time.perf_counter()
        generations = freeze()
        sync_ms = round((time.perf_counter() - t0) * 1000, 3)
        part = WorkerSnapshot(
            index=self._index,
            key_groups=(self._range.start, self._range.end),
            sources=self._positions[n],
            operators=marks,
            records_in=records_in,
            flush_ms=0.0,
            rocksdb_ms=0.0,
            sync_ms=sync_ms,
            files=(),
            size=0,
            incremental_size=0,
            async_ms=0.0,
        )
        self._written.clear()
        self._upload = threading.Thread(
            target=self._persist,
            args=(n, generations, part),
            name=f"weir-checkpoint-{n}",
            daemon=True,
        )
        self._upload.start()

    def _persist(self, n: int, generations: list[StateDelta], part: WorkerSnapshot) -> None:
        """The asynchronous part: the generations into RocksDB, RocksDB's checkpoint, the
        upload. ``part``: the synchronous part's figures; the rest are added here."""
        t0 = time.perf_counter()
        local = self._cfg.job_dir(self._job) / f"worker-{self._index}" / f"chk-{n}"
        try:
            try:
                for generation in generations:
                    generation.write(self._state)
            except WeirError as exc:  # the state cannot be written: the worker must fail
                log.error("worker=%d checkpoint=%d state write failed: %s", self._index, n, exc)
                self.failure = WorkerFailed(self._index, f"state write failed: {exc}")
                self._send(CheckpointDecline(n, str(exc)))
                return
            t1 = time.perf_counter()
            shutil.rmtree(local, ignore_errors=True)
            try:
                self._state.checkpoint(local)
            except WeirError as exc:
                log.error("worker=%d checkpoint=%d failed: %s", self._index, n, exc)
                self._send(CheckpointDecline(n, str(exc)))
                return
        finally:
            self._written.set()
        t2 = time.perf_counter()
        part = replace(
            part, flush_ms=round((t1 - t0) * 1000, 3), rocksdb_ms=round((t2 - t1) * 1000, 3)
        )
        self._upload_snapshot(n, local, part, t0)

    def _upload_snapshot(self, n: int, local: Path, part: WorkerSnapshot, t0: float) -> None:
        """``part``: the figures so far; the files and sizes are added here. ``t0``: when the
        asynchronous part began."""
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
