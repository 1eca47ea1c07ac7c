"""A ``ColumnBatch`` across the exchange: an Arrow IPC record batch, data only, inside the
exchange's authenticated msgpack frames (``framing``).

A columnar part of a frame is ``[node, batch, extra]``: ``batch`` is one Arrow record batch as an
IPC message (no schema: both sides derive it from the job, ``schema_for``), with the columns
``key`` (utf8), ``ts`` and ``wm`` (int64) and, per field the node's operators aggregate,
``t<i>`` (uint8 tags), ``i<i>`` (int64) and ``f<i>`` (float64); ``extra`` is msgpack
``[objects, records]``: the values that are not numbers (``{field: {row: value}}``) and the
records of the rows an operator may need whole (``{row: record}``). A record crosses only when
its row may be late (its time is not past the watermark it arrived under, so some window of it
may have fired) or holds a value that is not a number (a dead letter names it); every other row
is on time and folds from its columns alone.

Decoding reads the batch against the schema the receiver derives itself and validates it fully
(types, lengths, offsets, UTF-8), checks every tag, and refuses anything else with
``MessageError``: a peer's bytes are data, never code.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.ipc as ipc  # type: ignore[import-untyped]

from weir.base.errors import MessageError
from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import FLOAT, INT, OTHER
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged

Array = Any
_SCHEMAS: dict[int, Any] = {}


def schema_for(fields: int) -> Any:
    """The Arrow schema of a node's batch whose operators aggregate ``fields`` fields."""
    found = _SCHEMAS.get(fields)
    if found is None:
        cols = [("key", pa.string()), ("ts", pa.int64()), ("wm", pa.int64())]
        for i in range(fields):
            cols += [(f"t{i}", pa.uint8()), (f"i{i}", pa.int64()), (f"f{i}", pa.float64())]
        found = _SCHEMAS[fields] = pa.schema(cols)
    return found


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
    arrays = [
        pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]),
        _arrow(batch.ts),
        _arrow(batch.wms),
    ]
    objects: dict[int, dict[int, Any]] = {}
    for i, col in enumerate(batch.values.values()):
        arrays += [_arrow(col.tags), _arrow(col.i64), _arrow(col.f64)]
        if col.objects:
            objects[i] = col.objects
    records = {int(r): batch.records.get(int(r)) for r in needs_record(batch).tolist()}
    ipc_batch = pa.RecordBatch.from_arrays(arrays, schema=schema_for(len(batch.values)))
    extra = pack([objects, records]) if objects or records else b""
    return [batch.node, ipc_batch.serialize().to_pybytes(), extra]


def _arrow(values: Array) -> Any:
    """A numpy column of numbers as an Arrow array over its buffer. Not ``pa.array``: it asks
    whether its argument is a pandas object, which imports pandas where it is installed
    (pyspark's extra installs it), ~0.2 CPU-s in each worker that ships a batch."""
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


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
    schema = schema_for(len(names))
    try:
        batch = ipc.read_record_batch(pa.py_buffer(body), schema)
        batch.validate(full=True)
    except (pa.ArrowException, ValueError, OSError, EOFError) as exc:
        raise MessageError(f"an exchange part is not an Arrow batch of its node: {exc}") from None
    n = batch.num_rows
    key = batch.column(0)
    offsets = _numbers(key, np.int32, n, 1)
    starts = offsets[:-1].astype(np.int64) - offsets[0]
    lens = np.diff(offsets).astype(np.int32)
    held = key.buffers()[2]
    # Arrow's buffers are signed chars to the buffer protocol: bytes, as the kernels take them
    data = (memoryview(held).cast("B") if held is not None else memoryview(b""))[int(offsets[0]) :]
    values: dict[str, Tagged] = {}
    objects, records = _extra(extra, unpack, len(names), n)
    for i, name in enumerate(names):
        tags = _numbers(batch.column(3 + 3 * i), np.uint8, n)
        if n and int(tags.max()) > OTHER:
            raise MessageError(f"an exchange part's field {name!r} has an unknown value tag")
        i64 = _numbers(batch.column(4 + 3 * i), np.int64, n)
        f64 = _numbers(batch.column(5 + 3 * i), np.float64, n)
        values[name] = Tagged(tags, i64, f64, objects.get(i, {}))
    numeric = all(not v.objects and v.numeric() for v in values.values())
    ts = _numbers(batch.column(1), np.int64, n)
    wms = _numbers(batch.column(2), np.int64, n)
    keys = Keys(None, data, starts, lens)
    return ColumnBatch(node, keys, ts, wms, values, Records(sparse=records), numeric)


def _numbers(column: Any, dtype: Any, n: int, width: int = 0) -> Array:
    """A column's values as a read-only numpy view of its buffer (no copy)."""
    if column.null_count:
        raise MessageError("an exchange part has a null where a value belongs")
    count = n if not width else n + width
    offset = column.offset
    buf = column.buffers()[1]
    return np.frombuffer(buf, dtype, count, offset * np.dtype(dtype).itemsize)


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
