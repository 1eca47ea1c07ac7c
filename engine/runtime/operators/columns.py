"""A keyed batch as columns (``ColumnBatch``): what the chain hands the keyed side for a
``key_by`` whose operators fold columns (``colwindow``), what the exchange carries between
workers, and what those operators fold.

A row is a record that reached the ``key_by``: its key (``Keys``: strs, or UTF-8 spans into a
block of raw lines), its event time, the watermark it arrived under, and the values the
operators aggregate (``Tagged``: the scanner's tags with an ``int64`` and a ``float64`` column;
a value that is not an int or a float is tagged and its object kept in ``Tagged.objects``).
The record itself is reached only for the rare rows that need it (a late record, a value that is
not a number), through ``Records``: the decoded records, raw lines decoded on demand, or the few a
peer sent along.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from weir.engine.kernels.scan import FLOAT, INT, NULL, OTHER, STR

Array = Any  # numpy.ndarray
_TAG_OF: dict[type, int] = {str: STR, type(None): NULL}  # ints past int64, bools: OTHER


@dataclass(slots=True)
class Tagged:
    """One value column: ``tags`` (``scan``'s), ``i64`` for ``INT``, ``f64`` for ``FLOAT``;
    ``objects[row]`` holds the value of every other non-absent row (a str, a bool, None, an int
    past int64, a list...)."""

    tags: Array
    i64: Array
    f64: Array
    objects: dict[int, Any] = field(default_factory=dict)

    def take(self, idx: Array) -> Tagged:
        objects = self.objects
        if objects:
            where = {old: new for new, old in enumerate(idx.tolist())}
            objects = {where[r]: v for r, v in objects.items() if r in where}
        return Tagged(self.tags[idx], self.i64[idx], self.f64[idx], objects)

    def numeric(self) -> bool:
        """Is every row an int64 or a float?"""
        return bool(((self.tags == INT) | (self.tags == FLOAT)).all())

    def value(self, row: int) -> Any:
        tag = int(self.tags[row])
        if tag == INT:
            return int(self.i64[row])
        if tag == FLOAT:
            return float(self.f64[row])
        return self.objects.get(row)


def tag_values(values: list[Any]) -> Tagged:
    """A value column from Python values (a dict's field per record); ``scan.ABSENT`` where a
    record lacked the field (``MISSING``)."""
    n = len(values)
    types = set(map(type, values))
    if types == {int}:
        try:
            return Tagged(np.full(n, INT, np.uint8), np.array(values, np.int64), np.zeros(n))
        except OverflowError:
            pass  # an int past int64: tagged one by one below
    elif types == {float}:
        return Tagged(np.full(n, FLOAT, np.uint8), np.zeros(n, np.int64), np.array(values))
    tags = np.zeros(n, np.uint8)
    i64 = np.zeros(n, np.int64)
    f64 = np.zeros(n)
    objects: dict[int, Any] = {}
    for row, v in enumerate(values):
        t = type(v)
        if t is int and -(1 << 63) <= v < (1 << 63):
            tags[row], i64[row] = INT, v
        elif t is float:
            tags[row], f64[row] = FLOAT, v
        elif v is not MISSING:
            tags[row] = _TAG_OF.get(t, OTHER)
            objects[row] = v
    return Tagged(tags, i64, f64, objects)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # what a record lacking a field gives (``field_values``)


def field_values(recs: list[Any], name: str) -> list[Any]:
    """Field ``name`` of each record, ``MISSING`` where a record has none (or is no dict)."""
    try:
        return [r[name] for r in recs]
    except (KeyError, TypeError, IndexError):
        return [r.get(name, MISSING) if type(r) is dict else MISSING for r in recs]


class Keys:
    """A batch's keys in canonical form: ``strs``, or UTF-8 spans ``data[starts[i]:starts[i] +
    lens[i]]`` (a key field read from raw lines, or keys that crossed the exchange, whose
    ``data`` is a view of the frame's buffer)."""

    __slots__ = ("strs", "data", "starts", "lens")

    def __init__(
        self,
        strs: list[str] | None = None,
        data: bytes | memoryview = b"",
        starts: Array = None,
        lens: Array = None,
    ) -> None:
        self.strs = strs
        self.data = data
        self.starts = starts
        self.lens = lens

    def __len__(self) -> int:
        return len(self.strs) if self.strs is not None else len(self.starts)

    def take(self, idx: Array) -> Keys:
        if self.strs is not None:
            strs = self.strs
            return Keys([strs[i] for i in idx.tolist()])
        return Keys(None, self.data, self.starts[idx], self.lens[idx])

    def key(self, row: int) -> str:
        if self.strs is not None:
            return self.strs[row]
        s = int(self.starts[row])
        return bytes(self.data[s : s + int(self.lens[row])]).decode()

    def intern(self, interner: Any) -> Array:
        """Each row's dense key id (``kernels.Interner``)."""
        if self.strs is not None:
            return interner.intern_list(self.strs)
        return interner.intern(self.data, self.starts, self.lens)

    def groups(self, kernels: Any, max_parallelism: int) -> Array:
        """Each row's key group (``int32``)."""
        if self.strs is not None:
            return kernels.list_groups(self.strs, max_parallelism)
        return kernels.span_groups(self.data, self.starts, self.lens, max_parallelism)


class Records:
    """The records of a batch's rows, reached one at a time for the rare rows that need one:
    ``items[origin[row]]``, where an item is a record, or (``decode``) a raw line to decode
    (``decode(item)``: orjson, then the chain's projections). ``origin`` None: row ``i`` is
    item ``i``. A peer's batch carries only the records it may need (``sparse``)."""

    __slots__ = ("items", "origin", "decode", "sparse")

    def __init__(
        self,
        items: Sequence[Any] | None = None,
        origin: Array = None,
        decode: Callable[[Any], Any] | None = None,
        sparse: dict[int, Any] | None = None,
    ) -> None:
        self.items = items
        self.origin = origin
        self.decode = decode
        self.sparse = sparse

    def get(self, row: int) -> Any:
        """Row ``row``'s record (None when a peer did not send it: only a row that cannot be
        late nor lack a value is sent without)."""
        if self.sparse is not None:
            return self.sparse.get(row)
        assert self.items is not None
        item = self.items[row if self.origin is None else int(self.origin[row])]
        return item if self.decode is None else self.decode(item)

    def take(self, idx: Array) -> Records:
        if self.sparse is not None:
            where = {old: new for new, old in enumerate(idx.tolist())}
            return Records(sparse={where[r]: v for r, v in self.sparse.items() if r in where})
        origin = idx if self.origin is None else self.origin[idx]
        return Records(self.items, origin, self.decode)


@dataclass(slots=True)
class ColumnBatch:
    """One ``key_by`` node's rows of one source batch (see the module docstring); ``node`` is
    the node's index in the job graph. ``values`` holds a column per field the node's
    operators aggregate; ``numeric``: every one of those values is a number (no row needs the
    Python path for it)."""

    node: int
    keys: Keys
    ts: Array  # int64 event times
    wms: Array  # int64: the watermark each row arrived under
    values: dict[str, Tagged]
    records: Records
    numeric: bool = True

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, idx: Array) -> ColumnBatch:
        """The rows ``idx`` (an index array), in that order."""
        return ColumnBatch(
            self.node,
            self.keys.take(idx),
            self.ts[idx],
            self.wms[idx],
            {f: col.take(idx) for f, col in self.values.items()},
            self.records.take(idx),
            self.numeric,
        )

    def arrived(self, others: int) -> ColumnBatch:
        """The batch with each row's watermark bounded by ``others`` (the other channels'
        minimum: a row arrives under neither more)."""
        if not len(self.wms) or int(self.wms[-1]) <= others:
            return self
        return ColumnBatch(
            self.node,
            self.keys,
            self.ts,
            np.minimum(self.wms, others),
            self.values,
            self.records,
            self.numeric,
        )


def from_records(
    node: int,
    keys: list[str],
    recs: list[Any],
    ts: list[int],
    wms: list[int],
    fields: list[str],
) -> ColumnBatch:
    """A ``key_by``'s rows given as records (after per-record steps): the fields its
    operators aggregate are read once into columns."""
    values = {f: tag_values(field_values(recs, f)) for f in fields}
    return ColumnBatch(
        node,
        Keys(keys),
        np.array(ts, np.int64),
        np.array(wms, np.int64),
        values,
        Records(recs),
        all(not v.objects and v.numeric() for v in values.values()),
    )
