"""Window accumulators stored as cells (state format 2): many rows per RocksDB entry.

A cell holds the rows of one window of one *bucket* of keys: the keys of a key group fall into
``BUCKETS`` buckets by their hash, and a generation of changed rows is written as one entry per
(key group, bucket, window) it touches, never one per row::

    cell key = key_group (2 BE) | state id (2 BE) | bucket (2 BE) | window end (8, offset-binary)
               | generation (8 BE)

so a key's windows are still one prefix scan (``cell_prefix``: every window of its bucket, each
with the few generations not merged yet) and a key group is still one range (restore, rescale and
bulk load work by range, as before). A newer generation's row of a key replaces an older one's;
``merge`` folds a cell's generations into one.

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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgpack
import numpy as np

from weir.base.errors import StateError
from weir.state import layout

BUCKETS = 64  # buckets per key group (a power of two, at most 1 << 16)
_BUCKET_MASK = BUCKETS - 1
CELL_FORMAT = 1
INT, FLOAT, OBJECT = 0, 1, 2
_HEADER = struct.Struct("<BBHII")
_CELL_HEAD = struct.Struct(">HHH")
_GEN = struct.Struct(">Q")
_U32 = struct.Struct("<I")
CELL_KEY_BYTES = 6 + layout.NAMESPACE_BYTES + 8
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

SlotColumn = np.ndarray | list[Any]


def bucket_of_hash(crc: int) -> int:
    """A key's bucket from the CRC-32 of its bytes (the key group takes the low bits modulo
    the max parallelism; the bucket takes bits 16 and up, so the two are independent)."""
    return (crc >> 16) & _BUCKET_MASK


def bucket_of(key: bytes) -> int:
    return bucket_of_hash(zlib.crc32(key))


def cell_prefix(key_group: int, state_id: int, bucket: int) -> bytes:
    """Prefix of every window (and generation) of one bucket: a key's lookup scans it."""
    return _CELL_HEAD.pack(key_group, state_id, bucket)


def cell_key(key_group: int, state_id: int, bucket: int, end: int, gen: int) -> bytes:
    return cell_prefix(key_group, state_id, bucket) + layout.encode_namespace(end) + _GEN.pack(gen)


def decode_cell_key(raw: bytes) -> tuple[int, int, int, int, int]:
    """Inverse of ``cell_key``: ``(key_group, state_id, bucket, end, generation)``."""
    if len(raw) != CELL_KEY_BYTES:
        raise StateError(f"malformed cell key {raw[:40]!r}: expected {CELL_KEY_BYTES} bytes")
    kg, sid, bucket = _CELL_HEAD.unpack_from(raw)
    return kg, sid, bucket, layout.decode_namespace(raw[6:14]), int(_GEN.unpack_from(raw, 14)[0])


def rows_in(value: bytes) -> int:
    """How many rows a cell holds (from its header alone)."""
    return int(_HEADER.unpack_from(value)[3])


def cell_end(raw_key: bytes) -> int:
    """The window end of a cell key."""
    return layout.decode_namespace(raw_key[6:14])


# -- slot columns --------------------------------------------------------------------------------


def slot_column(values: Sequence[Any]) -> SlotColumn:
    """One slot's values as the narrowest column that holds each exactly: int64 when every
    one is an int within int64, float64 when every one is a float, else the list itself."""
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return list(values)
    if kinds == {float}:
        return np.array(values, dtype=np.float64)
    return list(values)


def _kind(col: SlotColumn) -> int:
    if isinstance(col, np.ndarray):
        if col.dtype == np.int64:
            return INT
        if col.dtype == np.float64:
            return FLOAT
        raise StateError(f"a slot column of dtype {col.dtype}; use int64, float64 or a list")
    return OBJECT


def _pad8(n: int) -> int:
    return -n & 7


@lru_cache(maxsize=256)
def _record_format(kinds: tuple[int, ...]) -> struct.Struct:
    """A record's slots, after its CRC and key offset."""
    codes = "".join("q" if k == INT else "d" if k == FLOAT else "II" for k in kinds)
    return struct.Struct("<8x" + codes)


# -- encoding ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CellRows:
    """Rows to write as cells: ``keys[i]`` (UTF-8 bytes, no key twice) in key group
    ``key_groups[i]`` with slot j ``slots[j][i]``."""

    keys: list[bytes]
    key_groups: np.ndarray
    slots: list[SlotColumn]


def encode_cells(rows: CellRows, state_id: int, end: int, gen: int) -> list[tuple[bytes, bytes]]:
    """The rows as cells of window ``end`` and generation ``gen``: ``(cell key, value)`` in
    cell-key order, one per (key group, bucket) the rows touch. numpy does the per-row work;
    Python runs once per cell."""
    keys = rows.keys
    n = len(keys)
    if n == 0:
        return []
    crc = np.fromiter(map(zlib.crc32, keys), np.uint32, n)
    cell = rows.key_groups.astype(np.int64) * BUCKETS + ((crc >> 16) & _BUCKET_MASK)
    order = np.argsort((cell << 32) | crc, kind="stable")  # cell < 2**31: fits in int64
    _tie_break(order, cell, crc, keys)
    cells = cell[order]
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
    stops = np.r_[starts[1:], n]
    return _assemble(rows, state_id, end, gen, order, crc, starts, stops, cells[starts])


def _tie_break(order: np.ndarray, cell: np.ndarray, crc: np.ndarray, keys: list[bytes]) -> None:
    """Rows of one cell with the same CRC go in key-byte order (rare: a few per million)."""
    c, h = cell[order], crc[order]
    same = np.flatnonzero((c[1:] == c[:-1]) & (h[1:] == h[:-1]))
    if not len(same):
        return
    i = 0
    runs = same.tolist()
    while i < len(runs):
        a = runs[i]
        b = a + 1
        while i + 1 < len(runs) and runs[i + 1] == b:
            i += 1
            b += 1
        part = order[a : b + 1].tolist()
        order[a : b + 1] = sorted(part, key=keys.__getitem__)
        i += 1


def _assemble(
    rows: CellRows,
    state_id: int,
    end: int,
    gen: int,
    order: np.ndarray,
    crc: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    cell_ids: np.ndarray,
) -> list[tuple[bytes, bytes]]:
    keys = rows.keys
    n = len(keys)
    kinds = tuple(_kind(c) for c in rows.slots)
    width = 8 + 8 * len(kinds)
    given = np.fromiter(map(len, keys), np.int64, n)
    lens = given[order]
    offs = np.cumsum(lens) - lens  # each key's offset in the blob of every key
    cell_of_row = np.repeat(np.arange(len(starts)), stops - starts)
    rec = np.zeros((n, width // 8), dtype=np.int64)
    rec32 = rec.view(np.uint32)
    rec32[:, 0] = crc[order]
    rec32[:, 1] = offs - offs[starts][cell_of_row]  # offsets within the cell's keys
    objects, obj_bounds = _object_slots(rows.slots, kinds, order, cell_of_row, starts, rec)
    for j, col in enumerate(rows.slots):
        if kinds[j] != OBJECT:
            rec[:, 1 + j] = np.asarray(col)[order].view(np.int64)
    records = rec.tobytes()
    blob = b"".join(map(keys.__getitem__, order.tolist()))
    kinds_raw = bytes(kinds) + bytes(_pad8(len(kinds)))
    key_starts = offs[starts]
    key_stops = (offs + lens)[stops - 1]
    heads = _cell_keys(cell_ids, state_id, end, gen)
    header = _HEADER.pack
    s = len(kinds)
    out: list[tuple[bytes, bytes]] = []
    for c, (a, b, ka, kb) in enumerate(
        zip(starts.tolist(), stops.tolist(), key_starts.tolist(), key_stops.tolist(), strict=True)
    ):
        parts = [
            header(CELL_FORMAT, s, 0, b - a, kb - ka),
            kinds_raw,
            records[a * width : b * width],
        ]
        parts.append(blob[ka:kb])
        if obj_bounds:
            parts.append(objects[obj_bounds[c] : obj_bounds[c + 1]])
        out.append((heads[c], b"".join(parts)))
    return out


def _cell_keys(cell_ids: np.ndarray, state_id: int, end: int, gen: int) -> list[bytes]:
    """The RocksDB keys of cells ``kg * BUCKETS + bucket`` of one window and generation."""
    head = np.zeros(len(cell_ids), dtype=[("kg", ">u2"), ("sid", ">u2"), ("bucket", ">u2")])
    head["kg"] = cell_ids // BUCKETS
    head["sid"] = state_id
    head["bucket"] = cell_ids % BUCKETS
    raw = head.tobytes()
    tail = layout.encode_namespace(end) + _GEN.pack(gen)
    return [raw[i : i + 6] + tail for i in range(0, len(raw), 6)]


def _object_slots(
    slots: list[SlotColumn],
    kinds: tuple[int, ...],
    order: np.ndarray,
    cell_of_row: np.ndarray,
    starts: np.ndarray,
    rec: np.ndarray,
) -> tuple[bytes, list[int]]:
    """The msgpack of every OBJECT slot value, in record order, row by row, and where each
    cell's part starts; fills the records' (offset, length) of those slots."""
    obj = [j for j, k in enumerate(kinds) if k == OBJECT]
    if not obj:
        return b"", []
    pack = msgpack.Packer().pack
    idx = order.tolist()
    cols = [list(map(pack, map(slots[j].__getitem__, idx))) for j in obj]
    packed = [p for row in zip(*cols, strict=True) for p in row]  # row-major
    lens = np.fromiter(map(len, packed), np.int64, len(packed)).reshape(len(idx), len(obj))
    flat_offs = (np.cumsum(lens.ravel()) - lens.ravel()).reshape(lens.shape)
    row_base = flat_offs[:, 0]
    cell_base = row_base[starts][cell_of_row]
    rec32 = rec.view(np.uint32)
    for i, j in enumerate(obj):
        rec32[:, 2 + 2 * j] = flat_offs[:, i] - cell_base
        rec32[:, 3 + 2 * j] = lens[:, i]
    blob = b"".join(packed)
    return blob, [*row_base[starts].tolist(), len(blob)]


def encode_cell(keys: list[bytes], slots: list[SlotColumn]) -> bytes:
    """One cell's value holding ``keys`` (no key twice, in any order) and their slots."""
    n = len(keys)
    if n == 0:
        kinds = tuple(_kind(c) for c in slots)
        return (
            _HEADER.pack(CELL_FORMAT, len(kinds), 0, 0, 0) + bytes(kinds) + bytes(_pad8(len(kinds)))
        )
    rows = CellRows(keys, np.zeros(n, np.uint16), slots)
    crc = np.fromiter(map(zlib.crc32, keys), np.uint32, n)
    order = np.argsort(crc, kind="stable")
    zero = np.zeros(n, np.int64)
    _tie_break(order, zero, crc, keys)
    start, stop = np.zeros(1, np.int64), np.full(1, n, np.int64)
    ((_, value),) = _assemble(rows, 0, 0, 0, order, crc, start, stop, np.zeros(1, np.int64))
    return value


# -- reading -------------------------------------------------------------------------------------


class Cell:
    """A cell's value, read in place: ``find`` a key by binary search, ``slots_at`` a row."""

    __slots__ = ("raw", "n", "kinds", "width", "records", "keys_at", "objects_at", "_fmt")

    def __init__(self, raw: bytes) -> None:
        if len(raw) < _HEADER.size:
            raise StateError(f"a cell of {len(raw)} bytes is shorter than its header")
        fmt, s, _, n, key_bytes = _HEADER.unpack_from(raw)
        if fmt != CELL_FORMAT:
            raise StateError(f"cell format {fmt} is not {CELL_FORMAT}, the one this weir reads")
        self.raw = raw
        self.n = n
        self.kinds = tuple(raw[_HEADER.size : _HEADER.size + s])
        self.records = _HEADER.size + s + _pad8(s)
        self.width = 8 + 8 * s
        self.keys_at = self.records + n * self.width
        self.objects_at = self.keys_at + key_bytes
        self._fmt = _record_format(self.kinds)
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
                out.append(msgpack.unpackb(self.raw[a : a + values[pos + 1]]))
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
                cols.append(list(map(msgpack.unpackb, raws)))
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


def key_bounds(key_group: int, state_id: int, key: bytes) -> tuple[bytes, bytes]:
    """``[lo, hi)`` of every cell (each window, each generation) that may hold ``key``."""
    lo = cell_prefix(key_group, state_id, bucket_of(key))
    return lo, layout.prefix_upper_bound(lo)


def key_windows(entries: Sequence[tuple[bytes, bytes]], key: bytes) -> dict[int, list[Any]]:
    """``key``'s slots by window end, from the entries of its bucket (``key_bounds``, in key
    order: each window's generations oldest first)."""
    h = zlib.crc32(key)
    out: dict[int, list[Any]] = {}
    i, n = 0, len(entries)
    while i < n:
        at = entries[i][0][:14]
        j = i + 1
        while j < n and entries[j][0][:14] == at:
            j += 1
        slots = find_in([v for _, v in entries[i:j]], key, h)
        if slots is not None:
            out[cell_end(at)] = slots
        i = j
    return out


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
    "cell_end",
    "cell_key",
    "cell_prefix",
    "decode_cell_key",
    "decode_rows",
    "encode_cell",
    "encode_cells",
    "find_in",
    "key_bounds",
    "key_windows",
    "merge",
    "rows_in",
    "slot_column",
]
