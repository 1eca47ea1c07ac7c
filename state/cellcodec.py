"""Cells' encoding (``state/cells.py`` describes the layout and reads them): the cell keys, the
key buckets, slot columns, and building cells from rows with numpy, Python running once per
cell, not once per row."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from weir.base.errors import StateError
from weir.state import layout, slotpack

BUCKETS = 64  # buckets per key group (a power of two, at most 1 << 15)
_BUCKET_MASK = BUCKETS - 1
# A generation of a window that changed few rows per key group is written in coarse cells
# (state format 3), each holding the keys of 1 << COARSE_SHIFT buckets, so its cells are not
# mostly header and RocksDB's cost an entry: a coarse cell's bucket field is COARSE | the
# bucket >> COARSE_SHIFT, after every (fine) bucket of its key group and state
COARSE_SHIFT = 3
COARSE = 0x8000
# ... when the generation has fewer rows than COARSE_ROWS a fine cell of the key groups it
# touches: a coarse cell then holds fewer than COARSE_ROWS << COARSE_SHIFT rows on average
COARSE_ROWS = 16
CELL_FORMAT = 1
INT, FLOAT, OBJECT = 0, 1, 2
HEADER = struct.Struct("<BBHII")
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


def buckets_of_hashes(crc: np.ndarray) -> np.ndarray:
    """``bucket_of_hash`` of each CRC-32 in ``crc`` (uint32)."""
    buckets: np.ndarray = (crc >> 16) & _BUCKET_MASK
    return buckets


def bucket_of(key: bytes) -> int:
    return bucket_of_hash(zlib.crc32(key))


def coarse_of(bucket: int) -> int:
    """The bucket field of the coarse cell that holds fine ``bucket``'s keys."""
    return COARSE | (bucket >> COARSE_SHIFT)


def is_coarse(field: int) -> bool:
    """Whether a cell key's bucket field names a coarse cell."""
    return bool(field & COARSE)


def bucket_fields(bucket: int) -> tuple[int, int]:
    """The cells a key of ``bucket`` may be in: its fine bucket's and its coarse cell's."""
    return bucket, coarse_of(bucket)


def every_bucket_field() -> list[int]:
    """Every bucket field of a key group and state, in key order: the fine buckets, then the
    coarse cells."""
    return [*range(BUCKETS), *range(coarse_of(0), coarse_of(BUCKETS - 1) + 1)]


def write_coarse(rows: int, key_groups: np.ndarray) -> bool:
    """Whether a generation of a window of ``rows`` rows in ``key_groups`` (one a row) is
    written in coarse cells: fewer than ``COARSE_ROWS`` rows a fine cell of the key groups it
    touches."""
    if not rows:
        return False
    touched = int(np.count_nonzero(np.bincount(key_groups)))
    return rows < COARSE_ROWS * BUCKETS * touched


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
    return int(HEADER.unpack_from(value)[3])


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


def pad8(n: int) -> int:
    return -n & 7


@lru_cache(maxsize=256)
def record_format(kinds: tuple[int, ...]) -> struct.Struct:
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
    crc: np.ndarray | None = None  # the keys' CRC-32 (uint32), when the caller has it


@dataclass(frozen=True, slots=True)
class PackedRows:
    """``CellRows`` with the keys packed, as the interner gathers them: key i is
    ``blob[offsets[i]:offsets[i + 1]]`` (``offsets`` int64, from 0), its CRC-32 ``crc[i]``
    (uint32); no key twice."""

    blob: bytes
    offsets: np.ndarray
    crc: np.ndarray
    key_groups: np.ndarray
    slots: list[SlotColumn]

    def __len__(self) -> int:
        return len(self.crc)

    def key(self, i: int) -> bytes:
        """Key ``i``'s bytes."""
        return self.blob[int(self.offsets[i]) : int(self.offsets[i + 1])]

    @classmethod
    def of(cls, rows: CellRows) -> PackedRows:
        """``rows`` packed (their CRCs computed unless given)."""
        keys, n = rows.keys, len(rows.keys)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.fromiter(map(len, keys), np.int64, n), out=offsets[1:])
        crc = np.fromiter(map(zlib.crc32, keys), np.uint32, n) if rows.crc is None else rows.crc
        return cls(b"".join(keys), offsets, crc, rows.key_groups, rows.slots)


def encode_cells(
    rows: CellRows, state_id: int, end: int, gen: int, coarse: bool = False
) -> list[tuple[bytes, bytes]]:
    """The rows as cells of window ``end`` and generation ``gen``: ``(cell key, value)`` in
    cell-key order, one per (key group, bucket) the rows touch (``coarse``: per key group and
    coarse cell). numpy does the per-row work; Python runs once per cell."""
    keys = rows.keys
    n = len(keys)
    if n == 0:
        return []
    crc = np.fromiter(map(zlib.crc32, keys), np.uint32, n) if rows.crc is None else rows.crc
    given = np.fromiter(map(len, keys), np.int64, n)

    def blob(order: np.ndarray, lens: np.ndarray) -> bytes:
        return _key_blob(keys, given, order, lens)

    order, starts, stops, cell_ids = _cells_of(rows.key_groups, crc, keys.__getitem__, coarse)
    lens = given[order]
    heads = _cell_keys(cell_ids, state_id, end, gen, coarse)
    return _assemble(rows.slots, order, crc, starts, stops, heads, lens, blob)


def encode_packed(
    rows: PackedRows, state_id: int, end: int, gen: int, coarse: bool = False
) -> list[tuple[bytes, bytes]]:
    """``encode_cells`` of packed rows, byte for byte (the pure-Python twin of the compiled
    ``engine/kernels/_cellk.pyx`` ``encode_packed``): the keys' blob is gathered by numpy."""
    if not len(rows):
        return []
    order, starts, stops, cell_ids = _cells_of(rows.key_groups, rows.crc, rows.key, coarse)
    lens = np.diff(rows.offsets)[order]

    def blob(order: np.ndarray, lens: np.ndarray) -> bytes:
        total = int(lens.sum())
        if not total:
            return b""
        dst = np.cumsum(lens) - lens
        src = np.repeat(rows.offsets[:-1][order] - dst, lens) + np.arange(total)
        return np.frombuffer(rows.blob, np.uint8)[src].tobytes()

    heads = _cell_keys(cell_ids, state_id, end, gen, coarse)
    return _assemble(rows.slots, order, rows.crc, starts, stops, heads, lens, blob)


def _cells_of(
    key_groups: np.ndarray, crc: np.ndarray, key_of: Callable[[int], bytes], coarse: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows' order (by cell, CRC, then key bytes), where each cell's rows start and stop in
    it, and the cells' ids (``kg * BUCKETS + bucket``; coarse: ``kg * (BUCKETS >>
    COARSE_SHIFT) + (bucket >> COARSE_SHIFT)``)."""
    n = len(crc)
    shift = COARSE_SHIFT if coarse else 0
    cell = (key_groups.astype(np.int64) << (BUCKETS.bit_length() - 1 - shift)) + (
        buckets_of_hashes(crc).astype(np.int64) >> shift
    )
    order = np.argsort((cell << 32) | crc, kind="stable")  # cell < 2**31: fits in int64
    _tie_break(order, cell, crc, key_of)
    cells = cell[order]
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
    stops = np.r_[starts[1:], n]
    return order, starts, stops, cells[starts]


def _tie_break(
    order: np.ndarray, cell: np.ndarray, crc: np.ndarray, key_of: Callable[[int], bytes]
) -> None:
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
        order[a : b + 1] = sorted(part, key=key_of)
        i += 1


def _assemble(
    slots: list[SlotColumn],
    order: np.ndarray,
    crc: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    heads: list[bytes],
    lens: np.ndarray,
    key_blob: Callable[[np.ndarray, np.ndarray], bytes],
) -> list[tuple[bytes, bytes]]:
    """The cells' values: ``lens`` are the keys' lengths in ``order``, ``key_blob(order,
    lens)`` their bytes end to end in it."""
    n = len(order)
    kinds = tuple(_kind(c) for c in slots)
    width = 8 + 8 * len(kinds)
    offs = np.cumsum(lens) - lens  # each key's offset in the blob of every key
    cell_of_row = np.repeat(np.arange(len(starts)), stops - starts)
    rec = np.zeros((n, width // 8), dtype=np.int64)
    rec32 = rec.view(np.uint32)
    rec32[:, 0] = crc[order]
    rec32[:, 1] = offs - offs[starts][cell_of_row]  # offsets within the cell's keys
    objects, obj_bounds = _object_slots(slots, kinds, order, cell_of_row, starts, rec)
    for j, col in enumerate(slots):
        if kinds[j] != OBJECT:
            rec[:, 1 + j] = np.asarray(col)[order].view(np.int64)
    records = rec.tobytes()
    blob = key_blob(order, lens)
    kinds_raw = bytes(kinds) + bytes(pad8(len(kinds)))
    key_starts = offs[starts]
    key_stops = (offs + lens)[stops - 1]
    header = HEADER.pack
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


def _key_blob(keys: list[bytes], given: np.ndarray, order: np.ndarray, lens: np.ndarray) -> bytes:
    """The keys' bytes end to end in ``order``. Joining a million keys in another order than
    they were made costs several times joining them in theirs (each key is a cache miss), so
    they go through a fixed-width numpy array, unless one key is much longer than the rest."""
    width = int(given.max())
    if width > 4 * float(given.mean()) + 64:
        return b"".join(map(keys.__getitem__, order.tolist()))
    table = np.array(keys, dtype=f"S{max(width, 1)}")[order].view(np.uint8)
    table = table.reshape(len(keys), max(width, 1))
    blob: bytes = table[np.arange(table.shape[1]) < lens[:, None]].tobytes()
    return blob


def _cell_keys(
    cell_ids: np.ndarray, state_id: int, end: int, gen: int, coarse: bool = False
) -> list[bytes]:
    """The RocksDB keys of cells ``cell_ids`` (``_cells_of``) of one window and generation."""
    span = BUCKETS >> COARSE_SHIFT if coarse else BUCKETS
    head = np.zeros(len(cell_ids), dtype=[("kg", ">u2"), ("sid", ">u2"), ("bucket", ">u2")])
    head["kg"] = cell_ids // span
    head["sid"] = state_id
    head["bucket"] = cell_ids % span | (COARSE if coarse else 0)
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
    pack = slotpack.packer().pack
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
            HEADER.pack(CELL_FORMAT, len(kinds), 0, 0, 0) + bytes(kinds) + bytes(pad8(len(kinds)))
        )
    crc = np.fromiter(map(zlib.crc32, keys), np.uint32, n)
    given = np.fromiter(map(len, keys), np.int64, n)
    order = np.argsort(crc, kind="stable")
    zero = np.zeros(n, np.int64)
    _tie_break(order, zero, crc, keys.__getitem__)
    start, stop = np.zeros(1, np.int64), np.full(1, n, np.int64)

    def blob(order: np.ndarray, lens: np.ndarray) -> bytes:
        return _key_blob(keys, given, order, lens)

    ((_, value),) = _assemble(slots, order, crc, start, stop, [b""], given[order], blob)
    return value


__all__ = [
    "BUCKETS",
    "COARSE",
    "COARSE_ROWS",
    "COARSE_SHIFT",
    "bucket_fields",
    "coarse_of",
    "every_bucket_field",
    "is_coarse",
    "write_coarse",
    "HEADER",
    "CELL_FORMAT",
    "CELL_KEY_BYTES",
    "FLOAT",
    "INT",
    "OBJECT",
    "CellRows",
    "PackedRows",
    "SlotColumn",
    "bucket_of",
    "bucket_of_hash",
    "buckets_of_hashes",
    "cell_end",
    "cell_key",
    "cell_prefix",
    "decode_cell_key",
    "encode_cell",
    "encode_cells",
    "encode_packed",
    "pad8",
    "record_format",
    "rows_in",
    "slot_column",
]
