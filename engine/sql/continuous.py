"""A continuous aggregate: ``SELECT id, COUNT(*) AS n FROM events GROUP BY id`` without a
window, compiled onto a keyed process function (Flink's ``GroupAggFunction``).

Each key keeps two value states: ``row``, the current result row (what
``/{job}/{view}/state/{key}`` serves, under ``state.row``), and ``acc``, the accumulators and
the processing time the key was last written. Every input record updates both and emits the
new row downstream as an upsert changelog record, ``{"op", "key", "row_kind", <columns>,
<aggregates>}``: ``op`` the view's name, as on every result record (decision 0012), ``row_kind``
Flink's row kind, ``+I`` (the key's first row) or ``+U`` (its new row; the sink keeps the
latest row per ``key``). A Kafka sink keys each message by ``key``, so a compacted topic holds
the current row of each group. Input is append-only, so no row is ever retracted (no ``-D``).

Idle-state retention (Flink's ``table.exec.state.ttl``): a key not written for ``ttl_ms`` of
processing time is forgotten, silently, as Flink's state TTL forgets it (no ``-D`` is emitted;
the key's next record starts a new row, ``+I``). One processing-time timer per key checks it;
a key whose retention ran out is never read back, even before its timer fires. ``ttl_ms == 0``
keeps every key forever. Once the input has ended (the final watermark), nothing expires: the
finished job serves its last rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.engine import agg
from weir.engine.job import Job
from weir.engine.nodes import ProcessNode
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.keygroups import key_value

INSERT, UPDATE = "+I", "+U"
CHANGELOG_FIELDS = frozenset({"op", "key", "row_kind"})
NOT_STORED = frozenset({"op", "row_kind"})  # served: the key, its columns, its aggregates


def _slots(a: agg.Builtin, record: Any) -> list[Any]:
    """The accumulator slots of one record alone (``Builtin.init_exprs`` as values)."""
    kind = a.kind
    v = record.get(a.input) if a.input is not None else None
    if kind == "count":
        return [0 if v is None else 1] if a.counts_values else [1]
    if kind in ("mean", "avg"):
        return [0 if v is None else v, 0 if v is None else 1]
    if v is None and not a.skips:
        raise ValueError(f"{a.kind}({a.input}) got NULL; the aggregate rejects NULLs")
    return [v]


class ContinuousAggregate:
    """The process function of a continuous aggregate view.

    Args:
        aggregates: result field -> aggregate (``agg``'s built-ins or ``agg.custom``).
        columns: result field -> record field, for the GROUP BY columns the SELECT shows.
        ttl_ms: idle-state retention in processing-time milliseconds; 0 keeps keys forever.
        sql: the view's query, for ``weir explain``.
    """

    def __init__(
        self,
        aggregates: Mapping[str, agg.Aggregate],
        columns: Mapping[str, str],
        ttl_ms: int,
        sql: str,
        name: str = "",
    ) -> None:
        self._builtins = [(n, a) for n, a in aggregates.items() if isinstance(a, agg.Builtin)]
        self._custom = [(n, a) for n, a in aggregates.items() if isinstance(a, agg.UserDefined)]
        self._order = list(aggregates)
        self.aggregates = dict(aggregates)
        self.columns = dict(columns)
        self.ttl_ms = ttl_ms
        self.sql = sql
        self.name = name
        self.__qualname__ = "ContinuousAggregate"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the view (``ProcessNode.describe``)."""
        aggregates = ", ".join(f"{n}={_described(a)}" for n, a in self.aggregates.items())
        ttl = f"state TTL {self.ttl_ms} ms" if self.ttl_ms else "state kept forever (TTL 0)"
        return {
            "sql_view": f"continuous aggregate {aggregates}; {ttl}; upsert changelog (+I, +U) "
            "by key",
            "state_ttl_ms": self.ttl_ms,
        }

    def process(self, record: Any, ctx: Any) -> None:
        """Fold ``record`` into its key's row and emit the row."""
        acc_state, row_state = ctx.value("acc"), ctx.value("row")
        held = acc_state.get()
        now = ctx.processing_time
        if held is not None and self._expired(held[0], now, ctx.watermark):
            held = None  # retention ran out before its timer fired: never read back
        slots = self.fold(held[1] if held is not None else None, record)
        kind = UPDATE if held is not None else INSERT
        row = {"op": self.name, "key": key_value(ctx.key), "row_kind": kind}
        for out, field in self.columns.items():
            row[out] = record.get(field)
        row.update(self.result(slots))
        if held is not None and self.ttl_ms == 0:
            previous = row_state.get()
            if previous is not None and _same(previous, row):
                acc_state.set([now, slots, None])
                return  # Flink's GroupAggFunction: an unchanged row without TTL is not re-sent
        timer = held[2] if held is not None else None
        if self.ttl_ms and timer is None:
            timer = now + self.ttl_ms
            ctx.register_processing_time_timer(timer)
        acc_state.set([now, slots, timer])
        row_state.set({k: v for k, v in row.items() if k not in NOT_STORED})
        ctx.emit(row)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        """Forget the key if it was not written for ``ttl_ms``; else check again later."""
        acc_state = ctx.value("acc")
        held = acc_state.get()
        if held is None or held[2] != timestamp:
            return  # a timer of a row already forgotten and begun again
        if ctx.watermark == MAX_WATERMARK:  # the input has ended: the last rows stay served
            acc_state.set([held[0], held[1], None])
            return
        now = ctx.processing_time
        if self._expired(held[0], now, ctx.watermark):
            acc_state.clear()
            ctx.value("row").clear()
            return
        again = held[0] + self.ttl_ms
        ctx.register_processing_time_timer(again)
        acc_state.set([held[0], held[1], again])

    def _expired(self, touched: int, now: int, watermark: int) -> bool:
        return bool(self.ttl_ms) and watermark != MAX_WATERMARK and now - touched >= self.ttl_ms

    def fold(self, slots: dict[str, list[Any]] | None, record: Any) -> dict[str, list[Any]]:
        """``slots`` (None: none yet) with ``record`` added, per aggregate."""
        out: dict[str, list[Any]] = {}
        for name, b in self._builtins:
            one = _slots(b, record)
            out[name] = one if slots is None else b.merge(slots[name], one)
        for name, u in self._custom:
            fn = u.function
            acc = fn.create() if slots is None else slots[name][0]
            out[name] = [fn.add(acc, record)]
        return out

    def result(self, slots: dict[str, list[Any]]) -> dict[str, Any]:
        """Each aggregate's result of ``slots``, in the SELECT's order."""
        return {name: self.aggregates[name].result(slots[name]) for name in self._order}


def continuous_views(job: Job) -> list[tuple[str, str]]:
    """``job``'s SQL views kept by process functions, ``(name, kind)``, in the job's order:
    continuous aggregates and Top-N or deduplication views (``windowed.window_views`` lists
    the windowed ones)."""
    from weir.engine.sql.ranked import RankFunction  # beside this module; no parser

    found = []
    for name, op in job.operators.items():
        if isinstance(op, ProcessNode) and isinstance(op.function, ContinuousAggregate):
            found.append((name, "continuous aggregate (GROUP BY without a window)"))
        elif isinstance(op, ProcessNode) and isinstance(op.function, RankFunction):
            found.append((name, "Top-N or deduplication view (ROW_NUMBER() OVER)"))
    return found


def _described(a: agg.Aggregate) -> str:
    """An aggregate as ``weir explain`` names it: ``sum(v)``, ``count(*)``, or its SQL."""
    if isinstance(a, agg.Builtin):
        shown = f"{a.kind}({a.input or '*'})"
        return shown if a.cast is None else f"cast({shown}, {a.cast})"
    return str(getattr(a.function, "sql", type(a.function).__qualname__))


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == v for k, v in b.items() if k not in NOT_STORED)
