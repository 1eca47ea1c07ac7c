"""A worker's part of a checkpoint once every input is at its barrier (Flink's
``SubtaskCheckpointCoordinator``).

Synchronous part, while the loop waits: each operator freezes what RocksDB lacks as one
generation (``operators/delta.py``: the changed slots copied, no encoding, no RocksDB call), and
the side outputs are flushed. Asynchronous part, as Flink's heap backend does it: the state
writer's thread (``statewriter.py``) writes the generations, then takes RocksDB's checkpoint (a
memtable flush and hard links); an upload thread then copies the files new since the last
*completed* checkpoint (file I/O and CRCs release the GIL) and acknowledges the checkpoint.

Exactly-once: the generations frozen after the barrier queue behind the checkpoint in the
writer, so none of them reaches RocksDB before its checkpoint is taken; meanwhile operators go
on in memory, which stays authoritative for every window. A checkpoint that fails or is
declined after the barrier still writes its generations: they are the operators' only record
of those changes. A barrier that arrives while the previous checkpoint is still written or
uploaded is declined (the coordinator triggers the next one, and retries a stop's final one).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from weir.base.errors import WeirError
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
from weir.engine.runtime.task.statewriter import StateWriter
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
        run_id: str,
    ) -> None:
        self._cfg = cfg
        self._run_id = run_id  # this attempt's: upload names never collide across runs
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
        self._upload_started = 0.0  # monotonic time the running upload began
        self.writer = StateWriter(index, state)
        self._checkpointing = False  # a checkpoint's generations wait in the writer

    def begin(self, n: int, positions: dict[str, SplitPosition]) -> None:
        """Checkpoint ``n``'s barrier passed the source side at ``positions``."""
        self._positions[n] = positions
        self._state.flush(wait=False)  # RocksDB's own threads flush the memtable while we align

    @property
    def idle(self) -> bool:
        """No generation is waiting to be written: the loop may write RocksDB itself."""
        return self.writer.idle

    def rested(self, now: float) -> bool:
        """Idle, and the writer rested after its last write (``StateWriter.rested``)."""
        return self.writer.rested(now)

    def check(self) -> None:
        self.writer.check()

    def flush(self, generations: list[StateDelta], marks: dict[str, OperatorMarks]) -> None:
        """A flush's generations to the writer, and the operators' watermarks when they were
        frozen (``StateWriter.written`` once written); with none, RocksDB holds everything
        already (a flush happens only while the writer is idle)."""
        if generations:
            self.writer.submit(generations, marks=marks)
        else:
            self.writer.written = marks

    def take(
        self,
        n: int,
        freeze: Callable[[], list[StateDelta]],
        marks: dict[str, OperatorMarks],
        records_in: int,
    ) -> None:
        """Every input is at barrier ``n``: the synchronous part (``freeze``); the writer takes
        it from there. While the previous checkpoint is still written or uploaded (storage slow
        or away: it retries, then fails), ``n`` is declined rather than waited for, so that
        processing never stops on storage."""
        busy = self._busy()
        if busy is not None:
            log.warning("worker=%d checkpoint=%d declined: %s", self._index, n, busy)
            self._send(CheckpointDecline(n, busy))
            return
        t0 = time.perf_counter()
        generations = freeze()
        part = WorkerSnapshot(
            index=self._index,
            key_groups=(self._range.start, self._range.end),
            sources=self._positions[n],
            operators=marks,
            records_in=records_in,
            flush_ms=0.0,
            rocksdb_ms=0.0,
            sync_ms=round((time.perf_counter() - t0) * 1000, 3),
            files=(),
            size=0,
            incremental_size=0,
            async_ms=0.0,
        )
        self._checkpointing = True
        then = partial(self._checkpoint, n, part, time.perf_counter())
        self.writer.submit(generations, then, marks)

    def _busy(self) -> str | None:
        """Why a new checkpoint cannot start (the previous one is still written or uploaded),
        naming the storage an upload waits on; None when it can."""
        if self._upload is not None and self._upload.is_alive():
            running = time.monotonic() - self._upload_started
            return (
                f"the previous checkpoint's upload to {self.storage.shown} is still running "
                f"({running:.1f} s)"
            )
        if self._checkpointing:
            return "the previous checkpoint's state write is still running"
        return None

    def _checkpoint(self, n: int, part: WorkerSnapshot, t0: float, error: WeirError | None) -> None:
        """On the writer's thread, once checkpoint ``n``'s generations (and every earlier one)
        are written: RocksDB's checkpoint, then the upload thread. ``t0``: the barrier."""
        try:
            if error is not None:
                self._send(CheckpointDecline(n, f"state write failed: {error}"))
                return
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
            part = replace(
                part, flush_ms=round((t1 - t0) * 1000, 3), rocksdb_ms=round((t2 - t1) * 1000, 3)
            )
            self._upload = threading.Thread(
                target=self._upload_snapshot,
                args=(n, local, part, t0),
                name=f"weir-upload-{n}",
                daemon=True,
            )
            self._upload_started = time.monotonic()
            self._upload.start()
        finally:
            self._checkpointing = False

    def _upload_snapshot(self, n: int, local: Path, part: WorkerSnapshot, t0: float) -> None:
        """``part``: the figures so far; the files and sizes are added here. ``t0``: when the
        asynchronous part began."""
        try:
            files, copied = self.storage.upload(
                local,
                n,
                self._index,
                f"{self._run_id}-w{self._index}",
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
        """Wait for the state writer, then for the upload."""
        self.writer.wait_idle(timeout_s)
        if self._upload is not None:
            self._upload.join(timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        self.writer.close(timeout_s)
