"""RocksDB state over rocksdict in raw mode: one primary instance per worker.

``RocksState`` is the state backend of ``state/backend.py``, plus what RocksDB's checkpoint and
bulk-load path needs (``flush``, ``ingest``). The API process reads the same files through
``state.secondary.SecondaryReader`` (a RocksDB secondary instance that catches up with the
primary in a few ms), so serving queries never runs on a worker's event loop; both read with
``BoundedIter`` and ``_scan``. rocksdict errors are wrapped here, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from rocksdict import (
    Checkpoint,
    DbClosedError,
    IngestExternalFileOptions,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from weir.base.errors import StateError
from weir.base.files import private_dir
from weir.state import walgate
from weir.state.backend import Batch, Snapshottable, StateBackend
from weir.state.rocksopts import RocksOptions, memory_of

log = logging.getLogger(__name__)


class RocksState:
    """A worker's primary RocksDB instance (raw bytes in, raw bytes out)."""

    def __init__(self, path: Path, options: RocksOptions | None = None) -> None:
        self.path = path
        self._options = options or RocksOptions()
        try:
            private_dir(path)
            self._db = Rdict(str(path), self._options.to_options())
        except Exception as exc:  # rocksdict raises plain Exception subclasses
            raise StateError(
                f"cannot open RocksDB state at {path}: {exc}; check the directory is writable "
                "and not opened by another running job"
            ) from exc
        self._deletes = 0  # since the last flush (``garbage_flush_deletes``)
        self._garbage_bound = self._options.garbage_flush_deletes
        self._write_opts = WriteOptions()
        self._write_lock = threading.Lock()  # a write never falls between WAL on and its flush
        self._wal = walgate.Gate(path, self._options.wal, self._write_opts, self._write_lock)
        self._wal.start(lambda: self._db.flush(True))

    def get(self, key: bytes) -> bytes | None:
        try:
            value = self._db.get(key)
        except Exception as exc:
            raise StateError(f"RocksDB read from {self.path} failed: {exc}") from exc
        return value if value is None else bytes(value)

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        """Apply deletes, then puts, in one atomic write batch."""
        if not puts and not deletes:
            return
        batch = WriteBatch(raw_mode=True)
        for k in deletes or ():
            batch.delete(k)
        for k, v in puts.items():
            batch.put(k, v)
        self.commit(batch)
        if deletes:
            self._deletes += len(deletes)
            # read live (the WAL is on): the fixed bound, whatever the state's size
            bound = (
                self._options.garbage_flush_deletes if self._wal.logging else self._garbage_bound
            )
            if bound and self._deletes >= bound:
                self._flush_garbage()

    def _flush_garbage(self) -> None:
        """Flush the memtables in the background, so reads stop stepping over their dead
        entries. Unless the live state is read (its WAL on, ``walgate``), the bound then grows
        to the state's key count: a large state's flushes, and the compactions that rewrite
        it, stay rare. Read, it stays: a bound grown with the state (which retention grows)
        let the dead entries each lookup steps over pile up for minutes (decision 0022)."""
        self.flush(wait=False)
        keys = self._db.property_int_value("rocksdb.estimate-num-keys") or 0
        self._garbage_bound = max(self._options.garbage_flush_deletes, keys)

    def memory(self) -> dict[str, int]:
        """What RocksDB holds in memory outside Python's heap, by kind (``memory_of``)."""
        return memory_of(self._db)

    @staticmethod
    def batch() -> WriteBatch:
        """A raw write batch for callers that build one directly (the hot path)."""
        return WriteBatch(raw_mode=True)

    def commit(self, batch: Batch) -> None:
        if not isinstance(batch, WriteBatch):
            raise StateError(
                f"RocksState.commit got a {type(batch).__name__}; commit a batch made by this "
                "backend's batch()"
            )
        try:
            with self._write_lock:
                self._db.write(batch, self._write_opts)
        except Exception as exc:
            raise StateError(f"RocksDB write to {self.path} failed: {exc}") from exc

    def scan(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[lo, hi)``. A worker reads these blocks once (restore, the retention
        purge's timers), so they do not enter the block cache: they would fill it for nothing
        and grow the worker's memory by the cache's size."""
        try:
            yield from _scan(self._db, lo, hi, fill_cache=False)
        except Exception as exc:
            raise StateError(f"RocksDB scan of {self.path} failed: {exc}") from exc

    def flush(self, wait: bool = True) -> None:
        """Flush the memtable to an SST file (``wait=False``: in RocksDB's background threads)."""
        self._deletes = 0  # the deletes go with the memtables that hold them
        try:
            self._db.flush(wait)
        except Exception as exc:
            raise StateError(f"RocksDB flush of {self.path} failed: {exc}") from exc

    def ingest(self, files: list[Path], move: bool = False) -> None:
        """Bulk-load SST files written with ``SstFileWriter`` (their keys are new to this DB or
        replace what it holds). ``move``: the files are the caller's to give away (linked or
        moved into the database instead of copied)."""
        opts = IngestExternalFileOptions()
        opts.set_move_files(move)
        try:
            self._db.ingest_external_file([str(f) for f in files], opts)
        except Exception as exc:
            raise StateError(
                f"ingesting {len(files)} SST files into {self.path} failed: {exc}"
            ) from exc

    def checkpoint(self, target: Path) -> None:
        """A consistent copy of the database at ``target`` (which must not exist): RocksDB
        flushes the memtable and hard-links the SST files; only the small files are copied."""
        self._deletes = 0  # flushed with the memtable
        try:
            Checkpoint(self._db).create_checkpoint(str(target))
        except Exception as exc:
            raise StateError(
                f"RocksDB checkpoint of {self.path} into {target} failed: {exc}"
            ) from exc

    def close(self) -> None:
        self._wal.close()
        try:
            with self._write_lock:  # not while the WAL gate flushes
                self._db.close()  # RocksDB flushes what it wrote unlogged
        except DbClosedError:
            return  # the contract lets close be called again
        self._wal.closed()


# mypy checks here that RocksState meets both contracts
_BACKEND: type[StateBackend] = RocksState
_SNAPSHOTTABLE: type[Snapshottable] = RocksState


def _scan(
    db: Rdict, lo: bytes, hi: bytes, fill_cache: bool = True
) -> Iterator[tuple[bytes, bytes]]:
    opts = ReadOptions()
    opts.set_iterate_upper_bound(hi)
    opts.fill_cache(fill_cache)  # type: ignore[call-arg]  # the stub omits its flag
    # rocksdict's own item iterator (the bound in ``opts``, kept alive by this frame): a
    # quarter less CPU an entry than valid/key/value/next called from here (a point lookup
    # reads ~10-16 cell entries)
    yield from db.items(from_key=lo, read_opt=opts)


class BoundedIter:
    """A RocksDB iterator with an upper bound: it keeps its ``ReadOptions`` alive, since the
    iterator reads the bound from them for as long as it is used."""

    def __init__(self, db: Rdict, hi: bytes) -> None:
        self._opts = ReadOptions()
        self._opts.set_iterate_upper_bound(hi)
        self._it: RdictIter = db.iter(self._opts)

    def seek(self, key: bytes) -> None:
        self._it.seek(key)

    def valid(self) -> bool:
        return bool(self._it.valid())

    def key(self) -> bytes:
        return bytes(self._it.key())
