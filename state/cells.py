"""Window accumulators stored as cells (state formats 2 and 3): many rows per RocksDB entry.

A cell holds the rows of one window of one *bucket* of keys: the keys of a key group fall into
``BUCKETS`` buckets by their hash, and a generation of changed rows is written as one entry per
(key group, bucket, window) it touches, never one per row::

    cell key = key_group (2 BE) | state id (2 BE) | bucket (2 BE) | window end (8, offset-binary)
               | generation (8 BE)

so a key's windows are one prefix scan (``cell_prefix``: every window of its bucket, each with
the few generations not merged yet) and a key group is still one range (restore, rescale and
bulk load work by range, as before). A newer generation's row of a key replaces an older one's;
``merge`` folds a cell's generations into one.

*Coarse cells* (format 3): a generation that changed few rows of a window for the key groups it
touches (fewer than ``COARSE_ROWS`` a bucket: at a million ids a 10 s window holds ~86k keys,
10 a cell) is written one entry per ``1 << COARSE_SHIFT`` buckets instead, under the bucket
field ``COARSE | bucket >> COARSE_SHIFT`` (after every fine bucket of its key group and state).
RocksDB's cost is per entry, so sparse windows cost an eighth of the entries; dense ones keep
fine cells, so a lookup never reads large cells. A key's windows are then two prefix scans (its
bucket's and its coarse cell's), merged by window and generation (``key_entries``).

A cell's value is a fixed-width block sorted by key hash, binary-searchable without decoding
it, little-endian::

    header   "<BBHII": format (1), slot count s, 0, row count n, key bytes
    kinds    s bytes (INT: int64, FLOAT: float64, OBJECT: msgpack), zero-padded to 8
    records  n x (CRC-32 of the key u32, key offset u32, s x 8 bytes), by (CRC, key bytes)
    keys     the keys' UTF-8 bytes, in the records' order (a key ends where the next begins)
    objects  the msgpack of every OBJECT slot (its 8 bytes hold offset u32, length u32 here)

Rows are ordered by hash, not by key: numpy sorts integers without a Python call per row, and a
lookup bisects the hash column in C (``bisect`` over a strided ``memoryview``).

A slot column is int64 or float64 when every value of it in the cell is an int (within int64)
or every one a float; anything else (an int past int64, ints and floats mixed, a user-defined
accumulator) is OBJECT, which keeps each value exactly as msgpack does today.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from weir.base.errors import StateError
from weir.state import layout, slotpack
from weir.state.cellcodec import (
    BUCKETS,
    CELL_FORMAT,
    CELL_KEY_BYTES,
    COARSE_SHIFT,
    FLOAT,
    HEADER,
    INT,
    OBJECT,
    CellRows,
    SlotColumn,
    bucket_fields,
    bucket_of,
    bucket_of_hash,
    buckets_of_hashes,
    cell_end,
    cell_key,
    cell_prefix,
    coarse_of,
    decode_cell_key,
    encode_cell,
    encode_cells,
    every_bucket_field,
    is_coarse,
    pad8,
    record_format,
    rows_in,
    slot_column,
)

_U32 = struct.Struct("<I")


# -- reading -------------------------------------------------------------------------------------


class Cell:
    """A cell's value, read in place: ``find`` a key by binary search, ``slots_at`` a row."""

    __slots__ = ("raw", "n", "kinds", "width", "records", "keys_at", "objects_at", "_fmt")

    def __init__(self, raw: bytes) -> None:
        if len(raw) < HEADER.size:
            raise StateError(f"a cell of {len(raw)} bytes is shorter than its header")
        fmt, s, _, n, key_bytes = HEADER.unpack_from(raw)
        if fmt != CELL_FORMAT:
            raise StateError(f"cell format {fmt} is not {CELL_FORMAT}, the one this weir reads")
        self.raw = raw
        self.n = n
        self.kinds = tuple(raw[HEADER.size : HEADER.size + s])
        self.records = HEADER.size + s + pad8(s)
        self.width = 8 + 8 * s
        self.keys_at = self.records + n * self.width
        self.objects_at = self.keys_at + key_bytes
        self._fmt = record_format(self.kinds)
        if self.objects_at > len(raw):
            raise StateError(f"a cell of {len(raw)} bytes is cut short (its rows need more)")

    def _key_span(self, i: int) -> tuple[int, int]:
        a = self.keys_at + _U32.unpack_from(self.raw, self.records + i * self.width + 4)[0]
        if i + 1 < self.n:
            b = (
                self.keys_at
                + _U32.unpack_from(self.raw, self.records + (i + 1) * self.width + 4)[0]
            )
        else:
            b = self.objects_at
        return a, b

    def key(self, i: int) -> bytes:
        a, b = self._key_span(i)
        return self.raw[a:b]

    def find(self, key: bytes, crc: int | None = None) -> int:
        """The row of ``key`` (``crc``: its CRC-32, when the caller has it), or -1."""
        h = zlib.crc32(key) if crc is None else crc
        hashes = memoryview(self.raw)[self.records : self.keys_at].cast("I")[:: self.width // 4]
        i = bisect_left(hashes, h)
        while i < self.n and hashes[i] == h:
            if self.key(i) == key:
                return i
            i += 1
        return -1

    def slots_at(self, i: int) -> list[Any]:
        values = self._fmt.unpack_from(self.raw, self.records + i * self.width)
        if OBJECT not in self.kinds:
            return list(values)
        out: list[Any] = []
        pos = 0
        for k in self.kinds:
            if k == OBJECT:
                a = self.objects_at + values[pos]
                out.append(slotpack.unpackb(self.raw[a : a + values[pos + 1]]))
                pos += 2
            else:
                out.append(values[pos])
                pos += 1
        return out

    def _records(self) -> np.ndarray:
        rec = np.frombuffer(self.raw, np.int64, self.n * self.width // 8, self.records)
        return rec.reshape(self.n, self.width // 8)

    def keys(self) -> list[bytes]:
        """Every key, in the records' order."""
        if not self.n:
            return []
        offs = (self._records()[:, 0] >> 32) + self.keys_at
        starts = offs.tolist()
        stops = [*starts[1:], self.objects_at]
        return list(map(self.raw.__getitem__, map(slice, starts, stops)))

    def columns(self) -> list[SlotColumn]:
        """Every slot as a column (numpy for INT and FLOAT, a list for OBJECT)."""
        rec = self._records()
        cols: list[SlotColumn] = []
        for j, k in enumerate(self.kinds):
            if k == INT:
                cols.append(rec[:, 1 + j].copy())
            elif k == FLOAT:
                cols.append(rec[:, 1 + j].view(np.float64).copy())
            else:
                both = rec[:, 1 + j]  # offset in the low half, length in the high one
                first = (both & 0xFFFFFFFF) + self.objects_at
                starts = first.tolist()
                stops = (first + (both >> 32)).tolist()
                raws = map(self.raw.__getitem__, map(slice, starts, stops))
                cols.append(list(map(slotpack.unpackb, raws)))
        return cols

    def rows(self) -> list[tuple[bytes, list[Any]]]:
        """``(key, slots)`` of every row, in the records' order."""
        cols = [c.tolist() if isinstance(c, np.ndarray) else c for c in self.columns()]
        keys = self.keys()
        if not cols:
            return [(k, []) for k in keys]
        return list(zip(keys, map(list, zip(*cols, strict=True)), strict=True))


def find_in(cells: Sequence[bytes], key: bytes, crc: int | None = None) -> list[Any] | None:
    """``key``'s slots in the newest of ``cells`` (one window's generations, oldest first)
    that holds it."""
    h = zlib.crc32(key) if crc is None else crc
    for raw in reversed(cells):
        cell = Cell(raw)
        i = cell.find(key, h)
        if i >= 0:
            return cell.slots_at(i)
    return None


def merge(cells: Sequence[bytes]) -> bytes:
    """One cell holding every key of ``cells`` (oldest first) with its newest row."""
    if len(cells) == 1:
        return cells[0]
    keys: list[bytes] = []
    cols: list[list[Any]] = []
    for raw in cells:
        cell = Cell(raw)
        keys.extend(cell.keys())
        part = cell.columns()
        if not cols:
            cols = [[] for _ in part]
        if len(part) != len(cols):
            raise StateError(f"cells of {len(cols)} and {len(part)} slots cannot merge")
        for acc, col in zip(cols, part, strict=True):
            acc.extend(col.tolist() if isinstance(col, np.ndarray) else col)
    newest = dict(zip(keys, range(len(keys)), strict=True))  # a later row of a key wins
    idx = list(newest.values())
    slots = [slot_column(list(map(c.__getitem__, idx))) for c in cols]
    return encode_cell(list(newest), slots)


@lru_cache(maxsize=4096)  # every point lookup asks; a job's hot buckets are few
def bucket_ranges(key_group: int, state_id: int, bucket: int) -> tuple[tuple[bytes, bytes], ...]:
    """``[lo, hi)`` of every cell (each window, each generation) that may hold a key of
    ``bucket``: its fine cells, then its coarse cell's (which hold other buckets' keys too)."""
    out = []
    for field in bucket_fields(bucket):
        lo = cell_prefix(key_group, state_id, field)
        out.append((lo, layout.prefix_upper_bound(lo)))
    return tuple(out)


def key_ranges(key_group: int, state_id: int, key: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """``bucket_ranges`` of ``key``'s bucket."""
    return bucket_ranges(key_group, state_id, bucket_of(key))


def from_window(lo: bytes, end: int) -> bytes:
    """The first key of ``lo``'s cell range (a ``cell_prefix``) holding window ``end`` or a
    later one: a read of a key's newest windows starts there."""
    return lo[:6] + layout.encode_namespace(end)


Scan = Callable[[bytes, bytes], Iterable[tuple[bytes, bytes]]]


def key_entries(scan: Scan, key_group: int, state_id: int, key: bytes) -> list[tuple[bytes, bytes]]:
    """Every entry that may hold ``key`` (``scan(lo, hi)`` of each of ``key_ranges``), in
    window order: by window end, each window's generations oldest first, fine and coarse."""
    found = [list(scan(lo, hi)) for lo, hi in key_ranges(key_group, state_id, key)]
    return in_window_order(*found)


def in_window_order(*parts: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Entries of one bucket's fine and coarse cells (each part in key order) as one list by
    window end, then generation (a newer generation's row of a key wins, whichever cell)."""
    full = [p for p in parts if p]
    if len(full) < 2:
        return full[0] if full else []
    return sorted(chain.from_iterable(full), key=_end_and_gen)


def _end_and_gen(entry: tuple[bytes, bytes]) -> bytes:
    return entry[0][6:]  # a cell key's window end and generation, both in byte order


def group_ranges(key_group: int, state_id: int) -> Iterator[list[tuple[bytes, bytes]]]:
    """For each coarse cell of a key group and state: the ``[lo, hi)`` of the fine buckets it
    covers and of its own entries (a restore reads a key group so, a coarse group at a time)."""
    span = 1 << COARSE_SHIFT
    for first in range(0, BUCKETS, span):
        lo = cell_prefix(key_group, state_id, first)
        hi = cell_prefix(key_group, state_id, first + span)
        own = cell_prefix(key_group, state_id, coarse_of(first))
        yield [(lo, hi), (own, layout.prefix_upper_bound(own))]


def windows_of(
    entries: Iterable[tuple[bytes, bytes]],
) -> Iterator[tuple[int, Iterable[tuple[bytes, list[Any]]]]]:
    """``(window end, rows)`` of each window in ``entries`` (cells of one state and key group,
    fine and coarse, in any order), ``rows`` the newest ``(key, slots)`` of each key."""
    by_end: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for ckey, raw in entries:
        by_end.setdefault(ckey[6:14], []).append((ckey[14:], raw))
    for ns in sorted(by_end):
        gens = sorted(by_end[ns], key=itemgetter(0))  # by generation, oldest first
        if len(gens) == 1:
            yield layout.decode_namespace(ns), Cell(gens[0][1]).rows()
            continue
        newest: dict[bytes, list[Any]] = {}
        for _, raw in gens:
            newest.update(Cell(raw).rows())  # a later generation's row of a key wins
        yield layout.decode_namespace(ns), newest.items()


FindWindows = Callable[[Sequence[tuple[bytes, bytes]], bytes, int], dict[bytes, list[Any]]]


def find_windows(
    entries: Sequence[tuple[bytes, bytes]], key: bytes, h: int
) -> dict[bytes, list[Any]]:
    """``key``'s (CRC-32 ``h``) slots by namespace, from the entries of its bucket (in key
    order: each window's generations oldest first). Each entry is searched in place, newest
    generation first, and a window found stops its search. The kernels' ``find_windows`` is
    this, compiled (``engine/kernels/_cellk.pyx``)."""
    found: dict[bytes, list[Any]] = {}
    for ckey, raw in reversed(entries):
        ns = ckey[6:14]
        if ns not in found:
            slots = lookup_row(raw, key, h)
            if slots is not None:
                found[ns] = slots
    return found


def key_windows(
    entries: Sequence[tuple[bytes, bytes]], key: bytes, find: FindWindows = find_windows
) -> dict[int, list[Any]]:
    """``key``'s slots by window end, from the entries of its bucket (``key_bounds``, in key
    order), found by ``find`` (``find_windows``, or the compiled kernel the API passes)."""
    found = find(entries, key, zlib.crc32(key))
    return {layout.decode_namespace(ns): slots for ns, slots in found.items()}


@lru_cache(maxsize=256)
def _kinds_format(kinds: bytes) -> tuple[struct.Struct, bool]:
    """A record's slots' format, and whether a slot is msgpack (then ``Cell`` reads it)."""
    return record_format(tuple(kinds)), OBJECT in kinds


def lookup_row(raw: bytes, key: bytes, h: int) -> list[Any] | None:
    """``key``'s (CRC-32 ``h``) slots in cell ``raw``, or None: ``Cell(raw).find`` and
    ``slots_at`` in one pass, without building a ``Cell``."""
    _, s, _, n, key_bytes = HEADER.unpack_from(raw)
    rec = HEADER.size + s + pad8(s)
    w = 8 + 8 * s
    keys_at = rec + n * w
    hashes = memoryview(raw)[rec:keys_at].cast("I")[:: w >> 2]
    i = bisect_left(hashes, h)
    while i < n and hashes[i] == h:
        a = keys_at + _U32.unpack_from(raw, rec + i * w + 4)[0]
        b = keys_at + (_U32.unpack_from(raw, rec + i * w + w + 4)[0] if i + 1 < n else key_bytes)
        if raw[a:b] == key:
            fmt, objects = _kinds_format(raw[HEADER.size : HEADER.size + s])
            if objects:
                return Cell(raw).slots_at(i)
            return list(fmt.unpack_from(raw, rec + i * w))
        i += 1
    return None


def decode_rows(cells: Sequence[bytes]) -> list[tuple[bytes, list[Any]]]:
    """Every ``(key, slots)`` of ``cells`` (one window's generations, oldest first), the
    newest row of each key."""
    return Cell(merge(cells)).rows()


__all__ = [
    "BUCKETS",
    "CELL_KEY_BYTES",
    "Cell",
    "CellRows",
    "bucket_of",
    "bucket_of_hash",
    "buckets_of_hashes",
    "cell_end",
    "cell_key",
    "cell_prefix",
    "decode_cell_key",
    "decode_rows",
    "encode_cell",
    "encode_cells",
    "find_in",
    "from_window",
    "find_windows",
    "bucket_fields",
    "bucket_ranges",
    "coarse_of",
    "every_bucket_field",
    "group_ranges",
    "is_coarse",
    "in_window_order",
    "key_entries",
    "key_ranges",
    "key_windows",
    "windows_of",
    "lookup_row",
    "merge",
    "rows_in",
    "slot_column",
]
