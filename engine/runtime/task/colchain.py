"""The chain of a source that feeds operators folding columns (``operators.colwindow``).

Per-record steps (a lambda's ``map``, ``filter`` or ``flat_map``) still run per record on
dicts, as in ``Chain``; everything around them is columns: event times are read out of the
records in one kernel pass (``kernels.record_columns``) and kept, with the watermark each record
arrives under, as ``int64`` arrays; at a ``key_by`` whose operators fold columns the key and the
aggregated fields are read in one more pass into a ``ColumnBatch``. Records that fail a check
take ``Chain``'s own per-record code, which gives each its dead-letter reason. Other nodes
(sinks, other ``key_by`` nodes, broadcast and forward streams) get lists, as from ``Chain``.
"""

from __future__ import annotations

from itertools import compress
from operator import itemgetter
from typing import Any

import numpy as np

from weir.engine import kernels as kernel_choice
from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import FLOAT, INT, STR
from weir.engine.nodes import (
    BroadcastNode,
    ForwardNode,
    KeyByNode,
    Node,
    SinkNode,
    SourceNode,
    StatelessNode,
)
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged, from_records
from weir.engine.runtime.task.chain import (
    _FILTERS,
    _MAPS,
    TS_MAX,
    TS_MIN,
    Chain,
    _apply,
    _key_of,
    _listed,
    _mask,
    keyby_nodes,
    walk,
)
from weir.engine.runtime.task.colscan import column_batch, scan_plan, scan_rows
from weir.engine.runtime.task.framing import carried_mask
from weir.engine.sources import SourceBatch
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.keygroups import needs_escape
from weir.state.layout import MAX_KEY_BYTES

Array = Any
_I64 = np.int64
# fields read once right after decoding (``ColumnChain._fetch``): (tags, i64, f64, objects) of
# every batch record, and which of them are still there (None: all of them)
Fetched = tuple[Array, Array, Array, list[Any], Array]
# a source read by the scan reads this many times the batch size at once: the batch's columns
# are a few bytes a field (not dicts), and each numpy pass over them has a fixed cost, so 1,024
# lines a batch spent about as much CPU per event on those passes as on the scan itself
SCAN_BATCH_SCALE = 8
SCAN_GIVE_UP = 3  # batches in a row that were not clean before the scan is tried less often
SCAN_RETRY = 16


class ColumnChain(Chain):
    """``Chain`` with event times, watermarks and the keyed side's input as columns (see the
    module docstring)."""

    def __init__(self, *args: Any, kernels: Kernels | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.k = kernels or kernel_choice.KERNELS
        self._fetch: tuple[str, ...] = self._fields_to_fetch()
        self._scan = scan_plan(self._source, self._columnar, self._keyby_index)
        self._scan_misses = 0  # batches in a row the scan could not take (colscan: not clean)

    @property
    def batch_scale(self) -> int:
        """How many times the batch size the source reads at once: ``SCAN_BATCH_SCALE`` while
        the scan takes its batches (the per-record path keeps the L2-sized batches)."""
        return SCAN_BATCH_SCALE if self._scan is not None and not self._scan_misses else 1

    def _fields_to_fetch(self) -> tuple[str, ...]:
        """The event-time field, and the key and fields of every columnar ``key_by`` that
        only filters separate from the source: records reach it unchanged, so those fields
        are read in the same pass as the event time, while the records are fresh in the
        cache, and each filter only narrows which rows remain."""
        if self._ts_field is None:
            return ()
        fields = [self._ts_field]
        for node, unchanged in walk(self._source):
            index = self._keyby_index.get(id(node))
            if isinstance(node, KeyByNode) and unchanged and index in self._columnar:
                if isinstance(node.key, str):
                    fields += [f for f in (node.key, *self._columnar[index]) if f not in fields]
        return tuple(fields) if len(fields) > 1 else ()

    def _process(self, batch: SourceBatch, split: str) -> None:
        if not batch.decoded and self._scan is not None and self._scanned(batch, split):
            return
        self._blank = 0
        recs = self._decode(batch.items) if not batch.decoded else _listed(batch.items)
        self._split_records[split] += len(batch.items) - self._blank
        recs = self._dicts_only(recs) if batch.decoded else recs
        if not recs:
            return
        fetched = self._fetched(recs)
        good, ts = self._column_timestamps(recs, fetched)
        if len(good) != len(recs):
            fetched = None
        if not good:
            return
        seen = self.max_ts.get(split, MIN_WATERMARK)
        wms, self.max_ts[split] = self.k.watermarks(ts, seen, self._bound)
        self.trace = _trace(wms, self.watermark(split))
        self._push_columns(self._source.children, good, ts, wms, not batch.decoded, fetched)

    def _scanned(self, batch: SourceBatch, split: str) -> bool:
        """Read a clean batch of lines straight into columns (``colscan``); False, having
        changed nothing, for any other batch. After ``SCAN_GIVE_UP`` batches in a row that were
        not clean, one in ``SCAN_RETRY`` is tried (a source whose lines are rarely clean costs
        little more than before)."""
        self._scan_misses += 1
        if self._scan_misses > SCAN_GIVE_UP and self._scan_misses % SCAN_RETRY:
            return False
        assert self._scan is not None
        hi = TS_MAX if self._max_future is None else min(TS_MAX, self._future_limit())
        found = scan_rows(self.k, self._scan, batch.items, hi)
        if found is None:
            return False
        self._scan_misses = 0
        scan, ts, keep = found
        self._split_records[split] += len(batch.items)
        seen = self.max_ts.get(split, MIN_WATERMARK)
        wms, self.max_ts[split] = self.k.watermarks(ts, seen, self._bound)
        self.trace = _trace(wms, self.watermark(split))
        if len(keep):
            index = self._keyby_index[id(self._scan.node)]
            self.keyed.append(column_batch(index, self._scan, scan, batch.items, ts, wms, keep))
        return True

    def _fetched(self, recs: list[Any]) -> Fetched | None:
        if not self._fetch:
            return None
        try:
            tags, i64, f64, objects = self.k.record_columns(recs, self._fetch)
        except TypeError:  # a record that is not a dict: Chain's way
            return None
        return tags, i64, f64, objects, None

    def _column_timestamps(
        self, recs: list[Any], fetched: Fetched | None
    ) -> tuple[list[Any], Array]:
        """The records with a valid event time, and those times (``int64``); the others go
        to the dead letters with ``Chain``'s reasons."""
        if self._ts_field is not None:
            tags = None
            if fetched is not None:
                tags, i64 = fetched[0], fetched[1]
            else:
                try:
                    tags, i64, _, _ = self.k.record_columns(recs, (self._ts_field,))
                except TypeError:  # a record that is not a dict: Chain's way
                    tags = None
            if tags is not None and bool((tags[0] == INT).all()):
                ts = i64[0]
                hi = TS_MAX if self._max_future is None else min(TS_MAX, self._future_limit())
                if int(ts.max()) <= hi:
                    return recs, ts
        good, times = self._timestamps(recs)
        return good, np.array(times, _I64)

    # -- the graph -----------------------------------------------------------------------------

    def _push_columns(
        self,
        nodes: list[Node],
        recs: list[Any],
        ts: Array,
        wms: Array,
        from_json: bool,
        fetched: Fetched | None,
    ) -> None:
        for node in nodes:
            if isinstance(node, StatelessNode):
                out, t, w, kept = self._stateless_columns(node, recs, ts, wms)
                if out:
                    exact = from_json and node.kind in _FILTERS
                    narrowed = _narrowed(fetched, kept) if node.kind in _FILTERS else None
                    self._push_columns(node.children, out, t, w, exact, narrowed)
            elif isinstance(node, KeyByNode) and self._keyby_index[id(node)] in self._columnar:
                self._key_columns(node, recs, ts, wms, from_json, fetched)
            elif isinstance(node, KeyByNode | BroadcastNode | ForwardNode | SinkNode):
                self._push([node], recs, ts.tolist(), wms.tolist(), from_json)

    def _stateless_columns(
        self, node: StatelessNode, recs: list[Any], ts: Array, wms: Array
    ) -> tuple[list[Any], Array, Array, Array | bool]:
        """The step's output, and (a filter) which rows it kept: an index array, True for
        every row, False when not known (a record raised: record by record, as ``Chain``)."""
        fn = node.fn
        try:
            if node.kind in _MAPS:
                return _apply(node, recs), ts, wms, False
            if node.kind in _FILTERS:
                mask = _mask(node, recs)
                if all(mask):
                    return recs, ts, wms, True
                idx = np.fromiter(compress(range(len(mask)), mask), np.int64)
                return list(compress(recs, mask)), ts[idx], wms[idx], idx
            outs = [list(fn(r)) for r in recs]
            counts = np.fromiter(map(len, outs), np.int64, len(outs))
            flat = [x for o in outs for x in o]
            return flat, np.repeat(ts, counts), np.repeat(wms, counts), False
        except Exception:  # noqa: BLE001 - redo record by record to find the bad ones
            out, t, w = self._stateless_slow(node, recs, ts.tolist(), wms.tolist())
            return out, np.array(t, _I64), np.array(w, _I64), False

    def _key_columns(
        self,
        node: KeyByNode,
        recs: list[Any],
        ts: Array,
        wms: Array,
        from_json: bool,
        fetched: Fetched | None,
    ) -> None:
        """A columnar ``key_by``: its rows as a ``ColumnBatch``; records without a valid key
        go to the dead letters (``chain._key_of``'s reasons)."""
        index = self._keyby_index[id(node)]
        fields = self._columnar[index]
        sel = node.key
        # SQL's GROUP BY of one column: its field, rows without a plain str key take the function
        field = sel if isinstance(sel, str) else getattr(sel, "weir_field", None)
        found = None
        if isinstance(sel, str) and fetched is not None:
            found = _picked(fetched, [self._fetch.index(f) for f in (sel, *fields)])
        elif field is not None:
            try:
                found = self.k.record_columns(recs, (field, *fields))
            except TypeError:  # a record that is not a dict
                found = None
        if found is None:
            # a key function, or records that are not dicts: Chain's checks, then columns
            listed, krecs, kts, kwms = self._keys(node, recs, ts.tolist(), wms.tolist())
            if listed and not from_json:
                listed, krecs, kts, kwms = self._carried(listed, krecs, kts, kwms)
            if listed:
                self.keyed.append(from_records(index, listed, krecs, kts, kwms, fields))
            return
        tags, i64, f64, objects = found
        ok = (tags[0] == STR) & (i64[0] * 4 <= MAX_KEY_BYTES)
        keys: list[str] = objects[0] or []
        keep: Array = None
        if not bool(ok.all()) or needs_escape(keys):  # a key shaped like the NULL key's too
            keys, keep = self._rare_keys(sel, recs, tags[0], ok, objects[0])
            if not keys:
                return
            recs = [recs[i] for i in keep.tolist()]
            ts, wms = ts[keep], wms[keep]
            tags, i64, f64 = _rows(tags, keep), _rows(i64, keep), _rows(f64, keep)
        carried = None if from_json else carried_mask(recs, self._dead)
        if carried is not None:
            more = np.flatnonzero(carried)
            if not len(more):
                return
            keep = more if keep is None else keep[more]
            keys, recs = list(compress(keys, carried)), list(compress(recs, carried))
            ts, wms = ts[more], wms[more]
            tags, i64, f64 = _rows(tags, more), _rows(i64, more), _rows(f64, more)
        values = {}
        numeric = True
        for j, f in enumerate(fields, start=1):
            held = objects[j]
            odd = {} if held is None else _objects(held, keep)
            values[f] = Tagged(tags[j], i64[j], f64[j], odd)
            numeric = numeric and not odd and _numbers(tags[j])
        self.keyed.append(ColumnBatch(index, Keys(keys), ts, wms, values, Records(recs), numeric))

    def _rare_keys(
        self, sel: Any, recs: list[Any], tags: Array, ok: Array, strs: list[Any] | None
    ) -> tuple[list[str], Array]:
        """Keys of a batch with some that are not plain strs: ints, ``None`` and strs that
        start with a backslash take their canonical form (``keygroups.canonical_key``), the
        others go to the dead letters (``chain._key_of`` says why)."""
        keys: list[str] = []
        keep: list[int] = []
        for i in range(len(recs)):
            if ok[i] and strs is not None and strs[i][:1] != "\\":
                keys.append(strs[i])
                keep.append(i)
                continue
            key, why = _key_of(sel, recs[i])
            if why is None:
                keys.append(key)
                keep.append(i)
            else:
                self._dead.add("key_by", *why, recs[i])
        return keys, np.array(keep, np.int64)


def _trace(wms: Array, last: int) -> list[int]:
    """The watermark after each record, without repeats (every reader of a trace looks for
    the first watermark that reaches a time, so repeats tell it nothing), ending at
    ``last``."""
    after = wms[1:]
    if len(after) > 1:  # the last of each run of equal watermarks
        after = after[np.flatnonzero(np.append(after[1:] != after[:-1], True))]
    trace: list[int] = after.tolist()
    if not trace or trace[-1] != last:
        trace.append(last)
    return trace


def _narrowed(fetched: Fetched | None, kept: Array | bool) -> Fetched | None:
    """``fetched`` after a filter kept the rows ``kept`` (see ``_stateless_columns``)."""
    if fetched is None or kept is True:
        return fetched
    if kept is False:
        return None
    tags, i64, f64, objects, rows = fetched
    return tags, i64, f64, objects, kept if rows is None else rows[kept]


def _picked(fetched: Fetched, fields: list[int]) -> tuple[Array, Array, Array, list[Any]]:
    """The fetched columns ``fields`` of the rows still there, as ``record_columns`` gives
    them."""
    tags, i64, f64, objects, rows = fetched
    where = np.array(fields)
    if rows is None:
        picked = (tags[where], i64[where], f64[where])
        held = [objects[j] for j in fields]
    else:
        grid = np.ix_(where, rows)
        picked = (tags[grid], i64[grid], f64[grid])
        listed = rows.tolist()
        take = itemgetter(*listed) if len(listed) > 1 else lambda held: (held[listed[0]],)
        held = [None if objects[j] is None else list(take(objects[j])) for j in fields]
    tags, i64, f64 = (np.ascontiguousarray(a) for a in picked)
    return tags, i64, f64, held


def _rows(columns: Array, idx: Array) -> Array:
    """Rows ``idx`` of every column of a ``(fields, rows)`` array, each column contiguous (what
    the kernels take; numpy may lay a column pick out by column)."""
    return np.ascontiguousarray(columns[:, idx])


def _numbers(tags: Array) -> bool:
    """Is every row an int64 or a float?"""
    return bool(((tags == INT) | (tags == FLOAT)).all())


def _objects(held: list[Any], keep: Array) -> dict[int, Any]:
    """A field's non-number values by row (after ``keep``, when some rows were dropped)."""
    rows = held if keep is None else [held[i] for i in keep.tolist()]
    return {r: v for r, v in enumerate(rows) if v is not None}


def chain_for(source: SourceNode, *args: Any, **kwargs: Any) -> Chain:
    """The chain of ``source``: a ``ColumnChain`` when it feeds a ``key_by`` whose operators
    fold columns (``columnar``, by node index), else a ``Chain``."""
    chain = Chain(source, *args, **kwargs)
    if any(chain._keyby_index.get(id(n)) in chain._columnar for n in keyby_nodes(source)):
        return ColumnChain(source, *args, **kwargs)
    return chain


__all__ = ["TS_MIN", "ColumnChain", "chain_for"]
