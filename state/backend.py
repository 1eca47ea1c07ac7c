"""The state backend contract: what operators need from the store that holds their state.

Keys and values are raw bytes; keys sort bytewise, and every key starts with its key group
(``state/layout.py``), so a key group, one key's windows or a state's due timers are each one
range. ``RocksState`` (``state/rocksdb.py``) is the backend of a running job; ``MemoryState``
(``state/memory.py``) keeps everything in a process's memory, for tests. One contract suite
(``tests/contract/``) runs against both.

What every backend guarantees:

- a write batch is applied whole, its operations in order (a later put of a key wins, a delete
  after a put removes it), and nothing of it is visible before ``commit``;
- ``scan(lo, hi)`` yields the keys in ``[lo, hi)`` in byte order, as they stood when the scan
  was first advanced: writes made while iterating do not change what it yields;
- after ``close`` every call raises ``StateError``; ``close`` itself may be called again.

Loading SST files (``RocksState.ingest``) and flushing RocksDB's memtable belong to RocksDB's
checkpoint and bulk-load path alone, which the worker drives on a ``RocksState``; they are not
part of the contract.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol


class Batch(Protocol):
    """Puts and deletes gathered for one atomic ``commit``."""

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...


class StateBackend(Protocol):
    """The store a worker's operators keep their state in."""

    def get(self, key: bytes) -> bytes | None: ...

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        """Apply ``deletes``, then ``puts``, in one atomic batch."""
        ...

    def batch(self) -> Batch:
        """An empty batch, for callers that add operations one at a time (the hot path)."""
        ...

    def commit(self, batch: Batch) -> None:
        """Apply a batch made by this backend's ``batch()`` (``StateError`` for any other)."""
        ...

    def scan(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` for the keys in ``[lo, hi)``, in byte order."""
        ...

    def memory(self) -> dict[str, int]:
        """The bytes it holds in memory outside Python's heap, by kind (RocksDB: ``memtables``,
        ``block_cache``, ``table_readers``), for the worker's status; empty when none."""
        ...

    def close(self) -> None: ...


class Snapshottable(Protocol):
    """A backend that copies its state into a directory, from which a new instance restores
    exactly that state (each backend has its own way to open one)."""

    def checkpoint(self, target: Path) -> None:
        """A consistent copy of the state at ``target``, which must not exist."""
        ...


__all__ = ["Batch", "Snapshottable", "StateBackend"]
