"""State in a process's memory: the contract of ``state/backend.py`` without RocksDB.

Unit tests run operators on it. Nothing persists: a new ``MemoryState`` is empty, and ``close``
drops what one held. ``checkpoint`` writes every entry into one file, through a temporary name
and a rename, so a checkpoint directory holds the whole state or no state file at all;
``MemoryState.restore`` reads it into a new instance.

Entries live in a dict, so a write is a dict update. The keys in byte order are a list brought
up to date by the first scan after writes: new keys are appended and the list sorted again,
which Python's sort does in linear time for a sorted run followed by a short one; after a
delete the list is rebuilt from the dict.
"""

from __future__ import annotations

import zlib
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from pathlib import Path

import msgpack

from weir.base.errors import StateError
from weir.base.files import DIR_MODE, replacing
from weir.state.backend import Batch, Snapshottable, StateBackend

_MAGIC = b"weir-memory-state-1\n"
_CRC_BYTES = 4
STATE_FILE = "state.msgpack"


class MemoryBatch:
    """Puts (key, value) and deletes (key, None) in the order they were added."""

    __slots__ = ("ops",)

    def __init__(self) -> None:
        self.ops: list[tuple[bytes, bytes | None]] = []

    def put(self, key: bytes, value: bytes) -> None:
        # checked here, so that commit cannot fail half-way through a batch
        if not isinstance(key, bytes) or not isinstance(value, bytes):
            raise TypeError(
                f"state keys and values are bytes; got a {type(key).__name__} key {key!r} "
                f"and a {type(value).__name__} value"
            )
        self.ops.append((key, value))

    def delete(self, key: bytes) -> None:
        if not isinstance(key, bytes):
            raise TypeError(f"state keys are bytes; got a {type(key).__name__} key {key!r}")
        self.ops.append((key, None))


class MemoryState:
    """Ordered bytes keys to bytes values in a dict, for one thread."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._order: list[bytes] = []  # every key in byte order, once _added and _removed are in
        self._added: list[bytes] = []
        self._removed = False
        self._closed = False

    @classmethod
    def restore(cls, checkpoint: Path) -> MemoryState:
        """A new instance holding exactly the state ``checkpoint(checkpoint)`` copied."""
        path = checkpoint / STATE_FILE
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise StateError(
                f"cannot read the state checkpoint {path}: {exc.strerror}; pass a directory "
                "written by MemoryState.checkpoint"
            ) from exc
        head = len(_MAGIC) + _CRC_BYTES
        payload = raw[head:]
        crc = int.from_bytes(raw[len(_MAGIC) : head], "big")
        if not raw.startswith(_MAGIC) or len(raw) < head or zlib.crc32(payload) != crc:
            raise StateError(
                f"{path} is not an intact MemoryState checkpoint (its header or CRC-32 does not "
                "match); restore from another checkpoint"
            )
        keys, values = msgpack.unpackb(payload)
        state = cls()
        state._order = keys
        state._data = dict(zip(keys, values, strict=True))
        return state

    def _check_open(self) -> None:
        if self._closed:
            raise StateError("this MemoryState is closed; open a new one (nothing persists)")

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self._data.get(key)

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        """Apply ``deletes``, then ``puts``, in one atomic batch."""
        batch = MemoryBatch()
        for k in deletes or ():
            batch.delete(k)
        for k, v in puts.items():
            batch.put(k, v)
        self.commit(batch)

    @staticmethod
    def batch() -> MemoryBatch:
        return MemoryBatch()

    def commit(self, batch: Batch) -> None:
        self._check_open()
        if not isinstance(batch, MemoryBatch):
            raise StateError(
                f"MemoryState.commit got a {type(batch).__name__}; commit a batch made by "
                "this backend's batch()"
            )
        data = self._data
        for key, value in batch.ops:
            if value is None:
                if data.pop(key, None) is not None:
                    self._removed = True
            else:
                if key not in data:
                    self._added.append(key)
                data[key] = value

    def _keys(self) -> list[bytes]:
        if self._removed:
            self._order = sorted(self._data)
        elif self._added:
            self._order += self._added
            self._order.sort()
        self._added = []
        self._removed = False
        return self._order

    def scan(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[lo, hi)``, copied when the scan is first advanced (as a RocksDB iterator
        reads the snapshot it was created at)."""
        self._check_open()
        keys = self._keys()
        start = bisect_left(keys, lo)
        stop = bisect_left(keys, hi, start)
        data = self._data
        yield from [(k, data[k]) for k in keys[start:stop]]

    @staticmethod
    def memory() -> dict[str, int]:
        """Nothing outside Python's heap: its state is Python objects."""
        return {}

    def checkpoint(self, target: Path) -> None:
        """Every entry, in byte order, in one file under ``target`` (which must not exist)."""
        self._check_open()
        keys = self._keys()
        payload = msgpack.packb([keys, [self._data[k] for k in keys]])
        try:
            target.mkdir(mode=DIR_MODE, parents=True)
            with replacing(target / STATE_FILE, durable=True) as fh:
                fh.write(_MAGIC + zlib.crc32(payload).to_bytes(_CRC_BYTES, "big") + payload)
        except FileExistsError as exc:
            raise StateError(
                f"MemoryState checkpoint into {target} failed: it already exists; pass a "
                "directory that does not exist"
            ) from exc
        except OSError as exc:
            raise StateError(
                f"MemoryState checkpoint into {target} failed: {exc.strerror}; pass a writable "
                "directory"
            ) from exc

    def close(self) -> None:
        self._closed = True
        self._data, self._order, self._added = {}, [], []


# mypy checks here that MemoryState meets both contracts
_BACKEND: type[StateBackend] = MemoryState
_SNAPSHOTTABLE: type[Snapshottable] = MemoryState

__all__ = ["STATE_FILE", "MemoryBatch", "MemoryState"]
