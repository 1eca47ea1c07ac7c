"""Pure-Python twin of the key interner (``_intern.pyx``).

An ``Interner`` belongs to one keyed operator: it maps each key, given as the UTF-8 bytes of its
canonical form (``state.keygroups.canonical_key``), to a dense id ``0, 1, 2, ...`` in order of
first sight, and computes the key's group once, when the key is new: ``crc32(bytes) %
max_parallelism``, as ``state.keygroups.key_group``. Accumulators are then arrays indexed by id,
and routing a row is an array lookup (``partitions``), not a CRC per row.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

Array = Any


def crc32_of(data: bytes) -> int:
    """CRC-32 of ``data``, as ``zlib.crc32`` (the compiled twin has its own table)."""
    return zlib.crc32(data)


def span_groups(data: bytes, starts: Array, lens: Array, max_parallelism: int) -> Array:
    """The key group of each key ``data[starts[i]:starts[i] + lens[i]]`` (``int32``), as
    ``state.keygroups.key_group_of_stored``: routing a batch needs no interner."""
    return np.array(
        [
            zlib.crc32(data[s : s + n]) % max_parallelism
            for s, n in zip(starts.tolist(), lens.tolist(), strict=True)
        ],
        np.int32,
    )


def pack_strs(keys: list[str]) -> tuple[bytes, Array]:
    """``keys``' UTF-8 bytes end to end, and their ``int32`` offsets (``len(keys) + 1``, from
    0): Arrow's layout of a string column.

    Raises:
        TypeError: a key is not a str.
        ValueError: the keys exceed 2 GiB.
    """
    for k in keys:
        if type(k) is not str:
            raise TypeError(f"key {k!r} is not a str")
    raw = [k.encode() for k in keys]
    return _packed(raw)


def gather_spans(data: bytes, starts: Array, lens: Array) -> tuple[bytes, Array]:
    """``pack_strs`` of the spans ``data[starts[i]:starts[i] + lens[i]]``."""
    raw = [bytes(data[s : s + n]) for s, n in zip(starts.tolist(), lens.tolist(), strict=True)]
    return _packed(raw)


def _packed(raw: list[bytes]) -> tuple[bytes, Array]:
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    if offsets[-1] > 0x7FFFFFFF:
        raise ValueError("the keys of one batch exceed 2 GiB")
    return b"".join(raw), offsets.astype(np.int32)


def list_groups(keys: list[str], max_parallelism: int) -> Array:
    """The key group of each key of ``keys`` (``int32``), as ``state.keygroups.key_group``.

    Raises:
        TypeError: a key is not a str.
    """
    for k in keys:
        if type(k) is not str:
            raise TypeError(f"key {k!r} is not a str")
    return np.array([zlib.crc32(k.encode()) % max_parallelism for k in keys], np.int32)


class Interner:
    """Dense ids for keys, and each key's key group.

    Args:
        max_parallelism: the job's number of key groups.

    Example:
        >>> it = Interner(128)
        >>> it.intern(b"ad-1ad-2ad-1", np.array([0, 4, 8]), np.array([4, 4, 4])).tolist()
        [0, 1, 0]
    """

    def __init__(self, max_parallelism: int) -> None:
        if max_parallelism < 1:
            raise ValueError(f"max_parallelism={max_parallelism} must be >= 1")
        self.max_parallelism = max_parallelism
        self._ids: dict[bytes, int] = {}
        self._raw: list[bytes] = []
        self._groups: list[int] = []
        self._crcs: list[int] = []

    def __len__(self) -> int:
        return len(self._raw)

    def intern(self, data: bytes, starts: Array, lens: Array) -> Array:
        """The id of each key ``data[starts[i]:starts[i] + lens[i]]``, new keys numbered in
        order of first sight.

        Args:
            data: the bytes the spans point into.
            starts: ``int64`` span starts.
            lens: ``int32`` span lengths.

        Returns:
            ``int32`` ids, one per span.
        """
        ids = self._ids
        out = []
        m = self.max_parallelism
        for s, n in zip(starts.tolist(), lens.tolist(), strict=True):
            raw = bytes(data[s : s + n])
            k = ids.get(raw)
            if k is None:
                k = ids[raw] = len(self._raw)
                self._raw.append(raw)
                crc = zlib.crc32(raw)
                self._crcs.append(crc)
                self._groups.append(crc % m)
            out.append(k)
        return np.array(out, dtype=np.int32)

    def intern_list(self, keys: list[str]) -> Array:
        """``intern`` for keys given as strs (each taken as its UTF-8 bytes).

        Raises:
            TypeError: a key is not a str.
        """
        for k in keys:
            if type(k) is not str:
                raise TypeError(f"key {k!r} is not a str")
        raw = [k.encode() for k in keys]
        data = b"".join(raw)
        lens = np.array([len(r) for r in raw], np.int32)
        starts = np.zeros(len(raw), np.int64)
        if len(raw) > 1:
            np.cumsum(lens[:-1], out=starts[1:])
        return self.intern(data, starts, lens)

    def groups(self, ids: Array) -> Array:
        """The key group of each id (``int32``)."""
        g = self._groups
        return np.array([g[k] for k in ids.tolist()], dtype=np.int32)

    def partitions(self, ids: Array, parallelism: int) -> Array:
        """The worker owning each id's key group at ``parallelism`` (``int32``):
        ``keygroups.operator_for_key_group``.

        Raises:
            ValueError: ``parallelism`` is outside ``1..max_parallelism``.
        """
        if not 1 <= parallelism <= self.max_parallelism:
            raise ValueError(
                f"parallelism={parallelism} must be between 1 and "
                f"max_parallelism={self.max_parallelism}"
            )
        g, m = self._groups, self.max_parallelism
        return np.array([g[k] * parallelism // m for k in ids.tolist()], dtype=np.int32)

    def key(self, kid: int) -> str:
        """The key with id ``kid``.

        Raises:
            IndexError: no key has that id.
        """
        if not 0 <= kid < len(self._raw):
            raise IndexError(f"key id {kid} is not interned (0..{len(self._raw) - 1})")
        return self._raw[kid].decode()

    def keys(self, start: int = 0) -> list[str]:
        """The keys with ids ``start, start + 1, ...`` (the new ones since ``start``)."""
        return [r.decode() for r in self._raw[start:]]

    def prefixes(self, ids: Array) -> Array:
        """Each id's key's first 8 UTF-8 bytes as a big-endian ``uint64``, zero padded: in key
        order, as str order is UTF-8's byte order (a key sorts no later than one of a greater
        prefix), so a ranking's tie among many keys is cut to the few it can pick from without
        a str per key.

        Raises:
            IndexError: an id is not interned.
        """
        picked = _picked(self._raw, ids)
        return np.array([int.from_bytes(r[:8].ljust(8, b"\0"), "big") for r in picked], np.uint64)

    def gather_crcs(self, ids: Array) -> Array:
        """Each id's key's CRC-32 (``uint32``, as ``zlib.crc32``): ``gather_keys(ids)[2]``
        without copying the keys (kept from when each key was new).

        Raises:
            IndexError: an id is not interned.
        """
        return np.array(_picked(self._crcs, ids), dtype=np.uint32)

    def gather_keys(self, ids: Array) -> tuple[bytes, Array, Array, Array]:
        """The keys of ``ids`` as the cell writer takes them (``cells.PackedRows``): their
        UTF-8 bytes end to end, ``int64`` offsets (``len(ids) + 1``, from 0), each key's
        CRC-32 (``uint32``, as ``zlib.crc32``) and its key group (``uint16``: a job has at
        most 32,768). Called on the operator's own thread: the compiled interner's arena moves
        as it grows.

        Raises:
            IndexError: an id is not interned.
        """
        keys = _picked(self._raw, ids)
        offsets = np.zeros(len(keys) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, keys), np.int64, len(keys)), out=offsets[1:])
        groups = self.groups(ids).astype(np.uint16)
        return b"".join(keys), offsets, self.gather_crcs(ids), groups


def _picked(table: list[Any], ids: Array) -> list[Any]:
    """``table[k]`` for each id ``k`` of ``ids``.

    Raises:
        IndexError: an id is not interned.
    """
    n = len(table)
    out = []
    for k in ids.tolist():
        if not 0 <= k < n:
            raise IndexError(f"key id {k} is not interned (0..{n - 1})")
        out.append(table[k])
    return out
