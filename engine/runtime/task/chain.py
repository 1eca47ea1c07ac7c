"""The chained, batch-at-a-time part of a worker: decode, timestamps, watermarks, stateless steps,
key extraction, then the keyed window operators.

Every step runs a whole batch in one comprehension; only when a batch holds a bad record does a
step fall back to record-by-record work, sending each bad record to the dead-letter output with
its reason. Timestamps are taken once at the source and travel with each record, with the
watermark the record arrived under (``wms``), through map, filter and flat_map.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

import orjson

from weir.engine.batches import from_batch, mask_of, to_batch
from weir.engine.kernels.ir import ExprError
from weir.engine.nodes import (
    BroadcastNode,
    ForwardNode,
    KeyByNode,
    Node,
    OperatorNode,
    SinkNode,
    SourceNode,
    StatelessNode,
)
from weir.engine.runtime.operators.columns import ColumnBatch, from_records
from weir.engine.runtime.outputs import DeadLetters
from weir.engine.runtime.task.framing import carried_mask
from weir.engine.sinks import SinkWriter
from weir.engine.sources import SourceBatch
from weir.engine.watermarks import MIN_WATERMARK, per_record_watermarks
from weir.engine.windows import MAX_TIME, MIN_TIME
from weir.state.keygroups import canonical_key, needs_escape
from weir.state.layout import MAX_KEY_BYTES

_DICT_ONLY = frozenset({dict})
# event times cover the signed 64-bit range, as Flink's longs; derived times are clamped to it
# (``engine.windows.base``), so every one of them fits the state keys, frames and JSON
TS_MAX = MAX_TIME
TS_MIN = MIN_TIME
Columns = tuple[list[Any], list[int], list[int]]  # records, timestamps, watermarks
Why = tuple[str, str]  # why a record is a dead letter: the kind of reason, and the reason


def _listed(items: Sequence[Any]) -> list[Any]:
    """A decoded batch's records (a source of records gives a list; anything else is copied)."""
    return items if isinstance(items, list) else list(items)


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


KeyedBatch = tuple[int, list[str], list[Any], list[int], list[int]]  # node, keys, recs, ts, wms
# what the chain hands the keyed side per key_by node: lists, or columns for a node whose
# operators fold columns (``operators.colwindow``)
Keyed = KeyedBatch | ColumnBatch
# stateless kinds that give one record for each (``with_columns``: a map made of expressions),
# and those that keep some records as they are
_MAPS = frozenset({"map", "with_columns", "map_batch"})
_FILTERS = frozenset({"filter", "filter_batch"})
# a node whose records go to the keyed side: by key group, to every worker, or to this one
ExchangeNode = KeyByNode | BroadcastNode | ForwardNode


class Chain:
    """Source side of a worker: turns source batches into keyed sub-batches (``keyed``), one per
    ``key_by`` node, which the worker routes to the owners of their key groups."""

    def __init__(
        self,
        source: SourceNode,
        sink_writers: dict[int, SinkWriter],
        dead: DeadLetters,
        max_future_ms: int | None = None,
        keyby_index: dict[int, int] | None = None,
        columnar: dict[int, list[str]] | None = None,
    ) -> None:
        """``keyby_index``: the job's key_by nodes by ``id`` (``graph.Graph``); by default
        this source's own, numbered in definition order. ``columnar``: the nodes (by index)
        whose rows go to the keyed side as columns, each with the fields its operators
        aggregate (``graph.column_nodes``)."""
        self._source = source
        # event times this far past the wall clock are refused: one such record would move the
        # watermark past every open window and close them all
        self._max_future = max_future_ms or None
        self._sinks = sink_writers  # keyed by id() of the SinkNode
        own = {id(n): i for i, n in enumerate(keyby_nodes(source))}
        self._keyby_index = own if keyby_index is None else keyby_index
        self.keyed: list[Keyed] = []
        self._columnar = columnar or {}
        self._dead = dead
        self._bound = source.watermarks.bound_ms
        self.max_ts: dict[str, int] = {}  # per split: max event time seen
        self.records_in = 0
        self._split_records: Counter[str] = Counter()  # per split: records read (no blank line)
        self._blank = 0  # blank lines in the batch being decoded
        self.trace: list[int] = []  # the watermark after each record of the last batch
        self._ts_field = source.timestamp if isinstance(source.timestamp, str) else None
        self._ts_fn = None if isinstance(source.timestamp, str) else source.timestamp

    def _future_limit(self) -> int:
        assert self._max_future is not None
        return int(time.time() * 1000) + self._max_future

    def watermark(self, split: str) -> int:
        """A split's current watermark."""
        return self._source.watermarks.watermark_for(self.max_ts.get(split, MIN_WATERMARK))

    def process(self, batch: SourceBatch, split: str = "0", start: Any = None) -> None:
        """Run one batch of ``split`` (read from offset ``start``) through the chain; the keyed
        sub-batches land in ``keyed`` and the split's watermark after each record in
        ``trace``."""
        self.trace = []
        self.keyed = []
        if not batch.items:
            return
        self.records_in += len(batch.items)
        self._dead.reading(split, start, batch.items, batch.first_line)
        try:
            self._process(batch, split)
        finally:
            self._dead.done_reading()

    def ended(self, split: str) -> None:
        """``split`` has ended: the dead letters say so if every record of it went there."""
        self._dead.split_ended(split, self._split_records.pop(split, 0))

    def _process(self, batch: SourceBatch, split: str) -> None:
        self._blank = 0
        recs = self._decode(batch.items) if not batch.decoded else _listed(batch.items)
        self._split_records[split] += len(batch.items) - self._blank
        recs = self._dicts_only(recs) if batch.decoded else recs
        if not recs:
            return
        recs, ts = self._timestamps(recs)
        if not recs:
            return
        wms, self.max_ts[split] = per_record_watermarks(
            ts, self.max_ts.get(split, MIN_WATERMARK), self._bound
        )
        self.trace = wms[1:]
        self.trace.append(self.watermark(split))
        self._push(self._source.children, recs, ts, wms, not batch.decoded)

    # -- source-side steps ---------------------------------------------------------------------

    def _decode(self, lines: Sequence[Any]) -> list[Any]:
        loads = orjson.loads
        try:
            recs = list(map(loads, lines))
            self._dead.decoded(recs)  # one record a line: where a bad one was read is its index
        except orjson.JSONDecodeError:  # a malformed or blank line: find it line by line
            recs = []
            for line in lines:
                if line is not None and line.isspace():  # None: a Kafka record without value
                    self._blank += 1
                    continue
                try:
                    recs.append(loads(line))
                except orjson.JSONDecodeError as exc:
                    self._dead.add("decode", "malformed-json", f"malformed JSON: {exc}", line)
        return self._dicts_only(recs)

    def _dicts_only(self, recs: list[Any]) -> list[Any]:
        if set(map(type, recs)) <= _DICT_ONLY:
            return recs
        good = []
        for r in recs:
            if isinstance(r, dict):
                good.append(r)
            else:
                why = f"expected a JSON object, got {type(r).__name__}"
                self._dead.add("decode", "not-an-object", why, r)
        return good

    def _timestamps(self, recs: list[Any]) -> tuple[list[Any], list[int]]:
        try:
            if self._ts_field is not None:
                ts = list(map(itemgetter(self._ts_field), recs))
            else:
                assert self._ts_fn is not None
                fn = self._ts_fn
                ts = [fn(r) for r in recs]
            hi = TS_MAX if self._max_future is None else min(TS_MAX, self._future_limit())
            if set(map(type, ts)) == {int} and TS_MIN <= min(ts) and max(ts) <= hi:
                return recs, ts
        except Exception:  # noqa: BLE001 - any user-function error sends the record aside
            pass
        good: list[Any] = []
        good_ts: list[int] = []
        for r in recs:
            t, why = self._timestamp_of(r)
            if why is None:
                good.append(r)
                good_ts.append(t)
            else:
                self._dead.add("timestamp", *why, r)
        return good, good_ts

    def _timestamp_of(self, rec: Any) -> tuple[int, Why | None]:
        try:
            if self._ts_field is not None:
                if self._ts_field not in rec:
                    return 0, ("missing-field", f"record has no timestamp field {self._ts_field!r}")
                t = rec[self._ts_field]
            else:
                assert self._ts_fn is not None
                t = self._ts_fn(rec)
        except ExprError as exc:  # an expression's reason names it
            return 0, ("expression-error", f"timestamp {exc}")
        except Exception as exc:  # noqa: BLE001
            return 0, (type(exc).__name__, f"timestamp function raised {_describe_error(exc)}")
        if type(t) is float and t.is_integer():
            t = int(t)
        bad = _bad_time(t)
        if bad is not None:
            return 0, bad
        if self._max_future is not None and t > self._future_limit():
            ahead = t - int(time.time() * 1000)
            return 0, (
                "in-the-future",
                f"timestamp {t} is {ahead} ms ahead of the wall clock, past the "
                f"`max_future_ms` limit of {self._max_future} ms",
            )
        return t, None

    # -- the graph -----------------------------------------------------------------------------

    def _push(
        self, nodes: list[Node], recs: list[Any], ts: list[int], wms: list[int], from_json: bool
    ) -> None:
        """``from_json``: the records are exactly as decoded from JSON lines (only filters passed),
        so every one of them can cross the exchange without a check."""
        for node in nodes:
            if isinstance(node, StatelessNode):
                out = self._stateless(node, recs, ts, wms)
                if out[0]:
                    self._push(node.children, *out, from_json and node.kind in _FILTERS)
            elif isinstance(node, KeyByNode):
                keys, krecs, kts, kwms = self._keys(node, recs, ts, wms)
                if keys and not from_json:
                    keys, krecs, kts, kwms = self._carried(keys, krecs, kts, kwms)
                if keys:
                    index = self._keyby_index[id(node)]
                    fields = self._columnar.get(index)
                    if fields is None:
                        self.keyed.append((index, keys, krecs, kts, kwms))
                    else:
                        self.keyed.append(from_records(index, keys, krecs, kts, kwms, fields))
            elif isinstance(node, BroadcastNode):
                self._broadcast(node, recs, ts, wms, from_json)
            elif isinstance(node, ForwardNode):  # stays on this worker: never encoded
                keys = [""] * len(recs)
                self.keyed.append((self._keyby_index[id(node)], keys, recs, ts, wms))
            elif isinstance(node, SinkNode):
                self._sinks[id(node)].write(recs)

    def _broadcast(
        self, node: BroadcastNode, recs: list[Any], ts: list[int], wms: list[int], exact: bool
    ) -> None:
        """A broadcast stream's records, for every worker: no key (the router sends the batch
        whole to each), so each carries an empty one."""
        keys = [""] * len(recs)
        if not exact:
            keys, recs, ts, wms = self._carried(keys, recs, ts, wms)
        if recs:
            self.keyed.append((self._keyby_index[id(node)], keys, recs, ts, wms))

    def _stateless(
        self, node: StatelessNode, recs: list[Any], ts: list[int], wms: list[int]
    ) -> Columns:
        fn = node.fn
        try:
            if node.kind in _MAPS:
                return _apply(node, recs), ts, wms
            if node.kind in _FILTERS:
                mask = _mask(node, recs)
                return (
                    list(compress(recs, mask)),
                    list(compress(ts, mask)),
                    list(compress(wms, mask)),
                )
            outs = [list(fn(r)) for r in recs]
            return (
                [x for o in outs for x in o],
                [t for o, t in zip(outs, ts, strict=True) for _ in o],
                [w for o, w in zip(outs, wms, strict=True) for _ in o],
            )
        except Exception:  # noqa: BLE001 - redo record by record to find the bad ones
            return self._stateless_slow(node, recs, ts, wms)

    def _stateless_slow(
        self, node: StatelessNode, recs: list[Any], ts: list[int], wms: list[int]
    ) -> Columns:
        out_r: list[Any] = []
        out_t: list[int] = []
        out_w: list[int] = []
        fn: Callable[[Any], Any] = node.fn
        for r, t, w in zip(recs, ts, wms, strict=True):
            try:
                if node.kind in _MAPS:
                    produced = _apply(node, [r])
                elif node.kind in _FILTERS:
                    produced = [r] if _mask(node, [r])[0] else []
                else:
                    produced = list(fn(r))
            except ExprError as exc:  # an expression's reason names it
                self._dead.add(node.kind, "expression-error", f"{node.kind} {exc}", r)
                continue
            except Exception as exc:  # noqa: BLE001
                why = f"{node.kind} raised {_describe_error(exc)}"
                self._dead.add(node.kind, type(exc).__name__, why, r)
                continue
            out_r.extend(produced)
            out_t.extend([t] * len(produced))
            out_w.extend([w] * len(produced))
        return out_r, out_t, out_w

    def _keys(
        self, node: KeyByNode, recs: list[Any], ts: list[int], wms: list[int]
    ) -> tuple[list[str], list[Any], list[int], list[int]]:
        sel = node.key
        try:
            keys = (
                list(map(itemgetter(sel), recs)) if isinstance(sel, str) else list(map(sel, recs))
            )
            if (
                set(map(type, keys)) == {str}
                and max(map(len, keys)) * 4 <= MAX_KEY_BYTES
                and not needs_escape(keys)
            ):
                return keys, recs, ts, wms
        except Exception:  # noqa: BLE001
            pass
        out_k: list[str] = []
        out_r: list[Any] = []
        out_t: list[int] = []
        out_w: list[int] = []
        for r, t, w in zip(recs, ts, wms, strict=True):
            key, why = _key_of(sel, r)
            if why is None:
                out_k.append(key)
                out_r.append(r)
                out_t.append(t)
                out_w.append(w)
            else:
                self._dead.add("key_by", *why, r)
        return out_k, out_r, out_t, out_w

    def _carried(
        self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]
    ) -> tuple[list[str], list[Any], list[int], list[int]]:
        """Only the records the exchange can carry (``framing``); the others go to the
        dead-letter output, at every parallelism alike (whether a record would cross or not)."""
        mask = carried_mask(recs, self._dead)
        if mask is None:
            return keys, recs, ts, wms
        return (
            list(compress(keys, mask)),
            list(compress(recs, mask)),
            list(compress(ts, mask)),
            list(compress(wms, mask)),
        )


def _bad_time(t: Any) -> Why | None:
    """Why ``t`` is no timestamp: not an integer, or outside epoch milliseconds' range."""
    if type(t) is not int:
        return "not-an-integer", f"timestamp {t!r} is not an integer epoch-milliseconds value"
    if not TS_MIN <= t <= TS_MAX:
        return "out-of-range", (
            f"timestamp {t} is outside the signed 64-bit range [{TS_MIN}, {TS_MAX}] of "
            "epoch milliseconds"
        )
    return None


def _key_of(sel: str | Callable[[Any], Any], rec: Any) -> tuple[str, Why | None]:
    try:
        if isinstance(sel, str):
            if not isinstance(rec, dict) or sel not in rec:
                return "", ("missing-field", f"record has no key field {sel!r}")
            raw = rec[sel]
        else:
            raw = sel(rec)
        key = canonical_key(raw)
    except ExprError as exc:  # an expression's reason names it
        return "", ("expression-error", f"key_by {exc}")
    except Exception as exc:  # noqa: BLE001
        return "", (type(exc).__name__, f"key: {_describe_error(exc)}")
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        return "", (
            "key-too-long",
            f"key of {size} bytes exceeds the {MAX_KEY_BYTES}-byte limit",
        )
    return key, None


def _apply(node: StatelessNode, recs: list[Any]) -> list[Any]:
    """A map-like step's records: one out for each in."""
    if node.kind == "map_batch":
        return from_batch(node.fn(to_batch(recs)), len(recs), "map_batch")
    return list(map(node.fn, recs))


def _mask(node: StatelessNode, recs: list[Any]) -> list[Any]:
    """A filter-like step's verdict on each record (truthy: kept)."""
    if node.kind == "filter_batch":
        return mask_of(node.fn(to_batch(recs)), len(recs))
    return list(map(node.fn, recs))


def walk(source: SourceNode) -> list[tuple[Node | OperatorNode, bool]]:
    """Every node below the source in definition order, with whether records reach it exactly
    as decoded from JSON (only filters on the way)."""
    found: list[tuple[Node | OperatorNode, bool]] = []

    def visit(nodes: list[Node], exact: bool) -> None:
        for n in nodes:
            found.append((n, exact))
            if isinstance(n, StatelessNode):
                visit(n.children, exact and n.kind in _FILTERS)
            elif isinstance(n, KeyByNode):
                found.extend((op, exact) for op in n.children)
            # a broadcast node's operators hang under their keyed input's key_by as well

    visit(source.children, True)
    return found


def keyby_nodes(source: SourceNode) -> list[ExchangeNode]:
    """Every node whose records go to the keyed side, in definition order (their index is how
    workers name them): key_by nodes, routed by key group, broadcast nodes, sent to every
    worker, and forward nodes, kept by the worker that read them."""
    return [n for n, _ in walk(source) if isinstance(n, KeyByNode | BroadcastNode | ForwardNode)]


def sink_nodes(source: SourceNode) -> list[SinkNode]:
    return [n for n, _ in walk(source) if isinstance(n, SinkNode)]
