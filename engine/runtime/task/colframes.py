"""A ``ColumnBatch`` across the exchange: the batch's columns end to end in one buffer, data
only, inside the exchange's authenticated msgpack frames (``framing``).

A columnar part of a frame is ``[node, body, extra]``. ``body`` holds the rows' columns, each
one buffer of little-endian numbers as numpy lays it out, 8-byte columns first so each stays
aligned in the receiver's copy::

    header   "<4sIII": b"WCB1", rows n, fields f, key bytes k
    ts, wm   n x int64 each: event time, the watermark the row arrived under
    values   per field i of the node's operators: n x int64 (``i``), n x float64 (``f``)
    offsets  (n + 1) x int32: key j is ``keys[offsets[j]:offsets[j + 1]]``
    tags     per field: n x uint8 (``scan``'s tags)
    keys     k bytes of UTF-8

``extra`` is msgpack ``[objects, records]``: the values that are not numbers (``{field: {row:
value}}``) and the records of the rows an operator may need whole (``{row: record}``). A record
crosses only when its row may be late (its time is not past the watermark it arrived under, so
some window of it may have fired) or holds a value that is not a number (a dead letter names
it); every other row is on time and folds from its columns alone.

Not Arrow IPC, which this was first: the same columns, but each worker that sent or received a
batch imported pyarrow (0.05 CPU-s a process, a tenth of a 2M-event job's CPU at p=2), and a
record batch cost more to build than this buffer does. Decoding reads the columns in place
(``np.frombuffer``, no copy) and validates them fully (the sizes, the offsets, each key's UTF-8,
every tag), and refuses anything else with ``MessageError``: a peer's bytes are data, never
code.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import numpy as np

from weir.base.errors import MessageError
from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import FLOAT, INT, OTHER
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged

Array = Any
MAGIC = b"WCB1"
_HEAD = struct.Struct("<4sIII")
_I64, _F64, _I32 = np.dtype("<i8"), np.dtype("<f8"), np.dtype("<i4")


def needs_record(batch: ColumnBatch) -> Array:
    """The rows whose record crosses with them (see the module docstring)."""
    mask = batch.ts <= batch.wms
    if not batch.numeric:
        for col in batch.values.values():
            mask |= (col.tags != INT) & (col.tags != FLOAT)
    return np.flatnonzero(mask)


def encode_part(batch: ColumnBatch, kernels: Kernels, pack: Any) -> list[Any]:
    """``batch`` as a frame's columnar part (``pack``: the frame's msgpack packer)."""
    keys = batch.keys
    if keys.strs is not None:
        data, offsets = kernels.pack_strs(keys.strs)
    else:
        data, offsets = kernels.gather_spans(keys.data, keys.starts, keys.lens)
    n = len(batch)
    fields = list(batch.values.values())
    parts: list[Any] = [_HEAD.pack(MAGIC, n, len(fields), len(data))]
    parts += [_column(batch.ts, _I64), _column(batch.wms, _I64)]
    for col in fields:
        parts += [_column(col.i64, _I64), _column(col.f64, _F64)]
    parts.append(_column(offsets, _I32))
    parts += [_column(col.tags, np.uint8) for col in fields]
    parts.append(data)
    objects = {i: col.objects for i, col in enumerate(fields) if col.objects}
    records = {int(r): batch.records.get(int(r)) for r in needs_record(batch).tolist()}
    extra = pack([objects, records]) if objects or records else b""
    return [batch.node, b"".join(parts), extra]


def _column(values: Array, dtype: Any) -> memoryview:
    return np.ascontiguousarray(values, dtype).data.cast("B")


def decode_part(raw: list[Any], fields: dict[int, list[str]], unpack: Any) -> ColumnBatch:
    """A columnar part's ``ColumnBatch`` (``fields``: the job's columnar nodes and their
    fields, ``graph.column_nodes``; ``unpack``: the frame's msgpack decoder).

    Raises:
        MessageError: the part is not a batch this job's node would send.
    """
    node, body, extra = raw
    names = fields.get(node) if type(node) is int else None
    if names is None or type(body) is not bytes or type(extra) is not bytes:
        raise MessageError(f"an exchange part names keyed node {node!r}, not a columnar one")
    n, f, k = _header(body, len(names))
    at = _HEAD.size
    ts, wms = np.frombuffer(body, _I64, n, at), np.frombuffer(body, _I64, n, at + 8 * n)
    at += 16 * n
    nums = []
    for _ in names:
        nums.append((np.frombuffer(body, _I64, n, at), np.frombuffer(body, _F64, n, at + 8 * n)))
        at += 16 * n
    offsets = np.frombuffer(body, _I32, n + 1, at)
    at += 4 * (n + 1)
    tags = [np.frombuffer(body, np.uint8, n, at + i * n) for i in range(f)]
    at += f * n
    _check_keys(body, at, offsets, k)
    objects, records = _extra(extra, unpack, len(names), n)
    values: dict[str, Tagged] = {}
    for i, name in enumerate(names):
        if n and int(tags[i].max()) > OTHER:
            raise MessageError(f"an exchange part's field {name!r} has an unknown value tag")
        values[name] = Tagged(tags[i], nums[i][0], nums[i][1], objects.get(i, {}))
    numeric = all(not v.objects and v.numeric() for v in values.values())
    starts = offsets[:-1].astype(np.int64)
    lens = np.diff(offsets).astype(np.int32)
    keys = Keys(None, memoryview(body)[at:], starts, lens)
    return ColumnBatch(node, keys, ts, wms, values, Records(sparse=records), numeric)


def _header(body: bytes, fields: int) -> tuple[int, int, int]:
    """Rows, fields and key bytes of ``body``, whose size they must account for exactly."""
    if len(body) < _HEAD.size:
        raise MessageError(f"an exchange part of {len(body)} bytes is not a column batch")
    magic, n, f, k = _HEAD.unpack_from(body)
    if magic != MAGIC:
        raise MessageError(f"an exchange part is not a column batch (it starts {magic!r})")
    if f != fields:
        raise MessageError(f"an exchange part has {f} fields where its node has {fields}")
    size = _HEAD.size + 16 * n * (1 + f) + 4 * (n + 1) + f * n + k
    if len(body) != size:
        raise MessageError(f"an exchange part of {len(body)} bytes holds {n} rows in {size}")
    return n, f, k


def _check_keys(body: bytes, at: int, offsets: Array, k: int) -> None:
    """Offsets from 0 to ``k``, never going back; the keys' bytes UTF-8, each key whole (none
    starts inside a character)."""
    steps = np.diff(offsets)
    if int(offsets[0]) != 0 or int(offsets[-1]) != k or (len(steps) and int(steps.min()) < 0):
        raise MessageError("an exchange part's key offsets do not cover its keys in order")
    try:
        str(memoryview(body)[at:], "utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"an exchange part's keys are not UTF-8: {exc}") from None
    firsts = offsets[:-1][steps > 0]
    if len(firsts) and bool((np.frombuffer(body, np.uint8, k, at)[firsts] & 0xC0 == 0x80).any()):
        raise MessageError("an exchange part's key offsets split a character")


def _extra(
    extra: bytes, unpack: Any, fields: int, n: int
) -> tuple[dict[int, dict[int, Any]], dict[int, Any]]:
    if not extra:
        return {}, {}
    try:
        found = unpack(extra)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MessageError(f"an exchange part's extra values are not msgpack: {exc}") from None
    if not (type(found) is list and len(found) == 2):
        raise MessageError("an exchange part's extra values are not [objects, records]")
    objects, records = found
    if type(objects) is not dict or type(records) is not dict:
        raise MessageError("an exchange part's extra values are not [objects, records]")
    for i, held in objects.items():
        if type(i) is not int or not 0 <= i < fields or type(held) is not dict:
            raise MessageError(f"an exchange part holds values of field {i!r}")
        _rows(held, n)
    _rows(records, n)
    return objects, records


def _rows(held: dict[Any, Any], n: int) -> None:
    for r in held:
        if type(r) is not int or not 0 <= r < n:
            raise MessageError(f"an exchange part names row {r!r} of {n}")
