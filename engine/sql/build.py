"""A query's plan turned into job API steps on a stream, and the Python front end:

job = Job("ad-stats")
events = job.source(sources.jsonl("events.jsonl"), timestamp="ts",
                    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000))
job.sql("impressions", \"\"\"
    SELECT id, window_start, window_end, COUNT(*) AS n, SUM(value) AS total
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    WHERE event = 'impression'
    GROUP BY id, window_start, window_end\"\"\", tables={"events": events})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlglot import exp

from weir.engine.agg import AggregateFunction
from weir.engine.kernels import ir
from weir.engine.nodes import SqlStep, StatelessNode
from weir.engine.sql.dialect import parse, too_deep
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.keys import key_selector
from weir.engine.sql.query import QueryPlan, TableDef
from weir.engine.sql.scalar import Fn
from weir.engine.sql.select import plan_query

# the planners of joins, ranks, MATCH_RECOGNIZE and windowless views, and the process functions
# they run, load with the first view of theirs: a windowed GROUP BY needs none of them
if TYPE_CHECKING:
    from weir.engine.job import DataStream, Job, ResultStream
    from weir.engine.sql.ranked import RankPlan
    from weir.engine.sql.sqljoin import JoinPlan
    from weir.engine.sql.temporal import TemporalPlan
    from weir.engine.sql.windowed import (
        WindowAggregateRankPlan,
        WindowJoinPlan,
        WindowRankPlan,
    )
    from weir.engine.streams import KeyedStream

TTL_SETTING = "table.exec.state.ttl"
GLOBAL_KEY = "*"  # the key of a query grouped by its window alone


def _labelled(fn: Fn, label: str) -> Fn:
    """``fn``, named by the SQL it runs, so ``weir explain`` shows the SQL."""
    fn.__qualname__ = label
    return fn


def _deriver(derived: Mapping[str, tuple[Fn, str]]) -> Fn:
    items = [(name, fn) for name, (fn, _) in derived.items()]
    if len(items) == 1:
        ((name, f),) = items
        return lambda r: {**r, name: f(r)}
    return lambda r: {**r, **{name: f(r) for name, f in items}}


def where_step(fn: Fn, sql: str, translated: ir.Expr | str | None) -> StatelessNode:
    """A ``WHERE``'s filter step: ``fn`` (SQL's closure) for the per-record chain, and its IR
    (``toir.to_ir``) for the columnar source, or why it has none, which ``weir explain``
    shows."""
    text = f"WHERE {sql}"
    if isinstance(translated, str | None):
        why = translated or "not translated to an expression"
        return StatelessNode("filter", _labelled(fn, text), sql=SqlStep(text, why_records=why))
    return StatelessNode("filter", _labelled(fn, text), expr=translated, sql=SqlStep(text))


def attach(plan: QueryPlan, stream: DataStream, state_ttl_ms: int | None = None) -> ResultStream:
    """Add the plan's filter, map, key_by, window and aggregate to ``stream``; a plan without
    a window is a continuous aggregate (a keyed process function) kept for ``state_ttl_ms``."""
    if plan.window is None:
        _check_ttl(plan, state_ttl_ms)  # before any step: a refused view leaves none behind
    if plan.where is not None:
        stream = stream.step(where_step(plan.where, plan.where_sql or "", plan.where_ir))
    if plan.derived:
        label = ", ".join(f"{n} = {sql}" for n, (_, sql) in plan.derived.items())
        why = "a computed GROUP BY column or aggregate input; the columnar source reads fields"
        step = SqlStep(label, why_records=why)
        stream = stream.step(
            StatelessNode("map", _labelled(_deriver(plan.derived), label), sql=step)
        )
    key = key_selector(plan.key_fields) if plan.key_fields else (lambda r: GLOBAL_KEY)
    _labelled(key, "|".join(plan.key_fields) or GLOBAL_KEY)
    if plan.window is None:
        return _continuous(plan, stream.key_by(key), state_ttl_ms or 0)  # checked above
    return (
        stream.key_by(key)
        .window(plan.window.assigner(), allowed_lateness_ms=plan.allowed_lateness_ms)
        .aggregate(plan.name, **plan.aggregates)
    )


def _check_ttl(plan: QueryPlan, state_ttl_ms: int | None) -> None:
    if state_ttl_ms is None:
        raise SqlUnsupported(
            f"view {plan.name!r} groups without a window (a continuous aggregate), which keeps "
            "one row per key for as long as it is told: declare its idle-state retention, SET "
            f"'{TTL_SETTING}' = '1 h' before the view (job.sql(…, state_ttl_ms=3_600_000) in "
            "Python), or '0' to keep every key forever; or group by a window"
        )
    if state_ttl_ms < 0:
        raise SqlError(f"view {plan.name!r}: state TTL {state_ttl_ms} ms is negative")


def _continuous(plan: QueryPlan, keyed: KeyedStream, state_ttl_ms: int) -> ResultStream:
    from weir.engine.sql.continuous import ContinuousAggregate

    fn = ContinuousAggregate(plan.aggregates, plan.columns, state_ttl_ms, plan.sql, plan.name)
    return keyed.process(fn, name=plan.name)


def add_view(
    job: Job,
    name: str,
    query: str,
    *,
    tables: Mapping[str, DataStream],
    functions: Mapping[str, AggregateFunction] | None = None,
    allowed_lateness_ms: int = 0,
    state_ttl_ms: int | None = None,
    primary_keys: Mapping[str, tuple[str, ...]] | None = None,
) -> ResultStream:
    """Compile ``query`` (one SELECT) over the streams ``tables`` names, as operator ``name``.
    A Python table has no declared columns; its time attribute is the source's ``timestamp``
    field. ``state_ttl_ms``: a continuous aggregate's idle-state retention (0: forever);
    ``primary_keys``: the tables' primary keys (a temporal join's versioned table has one)."""
    if not job.sources:
        raise SqlError(f"job.sql({name!r}): call job.source(...) first; the query reads it")
    ts = job.sources[0].timestamp
    if any(s.timestamp != ts for s in job.sources):
        raise SqlError(
            f"job.sql({name!r}): the job's sources take their time from different fields; a "
            "query's time attribute is one field: give every source the same timestamp= "
            "(or use the DataStream API)"
        )
    keys = primary_keys or {}
    defs = {
        t: TableDef(t, None, ts if isinstance(ts, str) else None, allowed_lateness_ms, keys.get(t))
        for t in tables
    }
    statements = parse(query, f"job.sql({name!r})")
    if len(statements) != 1:
        raise SqlError(f"job.sql({name!r}) takes one SELECT; it has {len(statements)} statements")
    view = other_view(statements[0], name, defs, tables, functions, state_ttl_ms)
    if view is not None:
        return view
    try:
        plan = plan_query(statements[0], name, defs, functions or {})
    except RecursionError:  # a long chain of operators compiles recursively
        raise too_deep(f"job.sql({name!r})") from None
    return attach(plan, tables[plan.table], state_ttl_ms)


def plain_select(statement: exp.Expr) -> bool:
    """Is ``statement`` for ``select.plan_query`` alone: no ``MATCH_RECOGNIZE``, no join and
    no subquery in its ``FROM`` (a ``ROW_NUMBER()`` view's)? Only a query that is not loads
    the other planners (each ``is_…`` below is false for a plain one)."""
    if not isinstance(statement, exp.Select):
        return True
    source = statement.args.get("from_")
    return not (
        statement.args.get("match") is not None
        or statement.args.get("joins")
        or (source is not None and isinstance(source.this, exp.Subquery))
    )


def other_view(
    statement: exp.Expr,
    name: str,
    defs: Mapping[str, TableDef],
    tables: Mapping[str, DataStream],
    functions: Mapping[str, AggregateFunction] | None,
    state_ttl_ms: int | None,
) -> ResultStream | None:
    """Add the view of a query that is not a plain SELECT (``plain_select``: a join, a rank,
    ``MATCH_RECOGNIZE``), its planner loaded with it; None for a query ``plan_query`` plans
    (a ``job.sql`` view and a script's ``CREATE VIEW`` alike)."""
    if plain_select(statement):
        return None
    from weir.engine.sql.ranked import RankPlan
    from weir.engine.sql.recognize import attach_match, is_match_recognize
    from weir.engine.sql.rownumber import is_row_number, plan_rank
    from weir.engine.sql.sqljoin import is_join, plan_join
    from weir.engine.sql.temporal import is_temporal, plan_temporal
    from weir.engine.sql.windowjoin import is_window_join, plan_window_join

    if is_match_recognize(statement):
        return attach_match(statement, name, defs, _only_table(tables, name))
    if is_window_join(statement):
        return attach_window_join(plan_window_join(statement, name, defs, functions), tables)
    if is_temporal(statement):
        return attach_temporal(plan_temporal(statement, name, defs), tables)
    if is_join(statement):
        return attach_join(plan_join(statement, name, defs), tables, state_ttl_ms)
    if is_row_number(statement):
        rank = plan_rank(statement, name, defs, functions)
        table = rank.table if isinstance(rank, RankPlan) else rank.rank.table
        return attach_rank(rank, tables[table])
    return None


def attach_rank(
    plan: RankPlan | WindowRankPlan | WindowAggregateRankPlan, stream: DataStream
) -> ResultStream:
    """Add a Top-N or deduplication view's filter, key_by and process function (per window,
    for a window TVF's rows or a window aggregate's groups)."""
    from weir.engine.sql.outerjoin import with_late_output
    from weir.engine.sql.ranked import RankFunction, RankPlan
    from weir.engine.sql.windowed import WindowAggregateRankPlan, WindowRank

    rank = plan if isinstance(plan, RankPlan) else plan.rank
    if isinstance(plan, WindowAggregateRankPlan):
        return _aggregate_rank(plan, stream)
    if rank.where is not None:
        stream = stream.filter(_labelled(rank.where, f"WHERE {rank.where_sql}"))
    key = key_selector(rank.partition) if rank.partition else (lambda r: GLOBAL_KEY)
    _labelled(key, "|".join(rank.partition) or GLOBAL_KEY)
    if isinstance(plan, RankPlan):
        return stream.key_by(key).process(RankFunction(plan), name=plan.name)
    return with_late_output(stream.key_by(key).process(WindowRank(plan), name=rank.name))


def _aggregate_rank(plan: WindowAggregateRankPlan, stream: DataStream) -> ResultStream:
    from weir.engine.sql.outerjoin import with_late_output
    from weir.engine.sql.windowed import WindowAggregateRank

    if plan.where is not None:
        stream = stream.filter(_labelled(plan.where, f"WHERE {plan.where_sql}"))
    if plan.derived:
        label = ", ".join(f"{n} = {sql}" for n, (_, sql) in plan.derived.items())
        stream = stream.map(_labelled(_deriver(plan.derived), label))
    partition = plan.rank.partition
    key = key_selector(partition) if partition else (lambda r: GLOBAL_KEY)
    _labelled(key, "|".join(partition) or GLOBAL_KEY)
    return with_late_output(
        stream.key_by(key).process(WindowAggregateRank(plan), name=plan.rank.name)
    )


def attach_join(
    plan: JoinPlan, streams: Mapping[str, DataStream], state_ttl_ms: int | None = None
) -> ResultStream:
    """Add a join view: each side filtered and keyed, joined within the bounds (an interval
    join), or by key alone for as long as the state TTL keeps the rows (a regular join)."""
    from weir.engine.sql.outerjoin import OuterIntervalJoin, with_late_output
    from weir.engine.sql.sqljoin import RegularJoin, pair_function

    if not plan.bounded and plan.kind != "INNER":
        raise SqlUnsupported(
            f"view {plan.name!r}: a {plan.kind} OUTER join without a time bound (a regular "
            "outer join) retracts its padded rows when a partner comes, which weir's "
            "append-only results cannot say: bound it (r.ts BETWEEN l.ts - INTERVAL … AND "
            "l.ts + INTERVAL …), an outer interval join"
        )
    if not plan.bounded and not state_ttl_ms:
        raise SqlUnsupported(
            f"view {plan.name!r} joins without a time bound (a regular join), whose rows would "
            f"be kept forever: bound it (r.ts BETWEEN l.ts - INTERVAL … AND l.ts + INTERVAL …), "
            f"or SET '{TTL_SETTING}' = '1 h' (job.sql(…, state_ttl_ms=…)) before the view"
        )
    keyed = []
    for side in (0, 1):
        stream, where = streams[plan.tables[side]], plan.filters[side]
        if where is not None:
            stream = stream.filter(_labelled(where, f"WHERE ({plan.tables[side]})"))
        keys = plan.keys[side]
        keyed.append(stream.key_by(_labelled(key_selector(keys), "|".join(keys))))
    if not plan.bounded:
        fn = RegularJoin(plan, state_ttl_ms or 0)
        return keyed[0].connect(keyed[1]).process(fn, name=plan.name)
    if plan.kind != "INNER":
        outer = keyed[0].connect(keyed[1]).process(OuterIntervalJoin(plan), name=plan.name)
        return with_late_output(outer)
    joined = keyed[0].interval_join(keyed[1]).between(plan.lower, plan.upper)
    if not plan.lower_inclusive:
        joined = joined.lower_bound_exclusive()
    if not plan.upper_inclusive:
        joined = joined.upper_bound_exclusive()
    return joined.process(pair_function(plan), name=plan.name)


def attach_window_join(plan: WindowJoinPlan, streams: Mapping[str, DataStream]) -> ResultStream:
    """Add a window join view: each side filtered and keyed, then the keyed co-process function
    that pairs each window's rows when it fires; its late rows go to the ``late`` output."""
    from weir.engine.sql.outerjoin import with_late_output
    from weir.engine.sql.windowed import WindowJoin

    keyed = []
    for side in (0, 1):
        stream, where = streams[plan.tables[side]], plan.filters[side]
        aggregate = plan.sides[side]
        if aggregate is not None:
            where = aggregate.where
        if where is not None:
            stream = stream.filter(_labelled(where, f"WHERE ({plan.tables[side]})"))
        if aggregate is not None and aggregate.derived:
            label = ", ".join(f"{n} = {sql}" for n, (_, sql) in aggregate.derived.items())
            stream = stream.map(_labelled(_deriver(aggregate.derived), label))
        keys = plan.keys[side]
        key = key_selector(keys) if keys else (lambda r: GLOBAL_KEY)
        keyed.append(stream.key_by(_labelled(key, "|".join(keys) or GLOBAL_KEY)))
    return with_late_output(keyed[0].connect(keyed[1]).process(WindowJoin(plan), name=plan.name))


def attach_temporal(plan: TemporalPlan, streams: Mapping[str, DataStream]) -> ResultStream:
    """Add a temporal join view: the probe and the versioned table filtered, keyed by the
    versioned table's primary key (and the probe's columns equated with it), joined."""
    from weir.engine.sql.lookup import LookupJoin
    from weir.engine.sql.outerjoin import with_late_output
    from weir.engine.sql.temporal import TemporalJoin

    keyed = []
    for side in (0, 1):
        stream = streams[plan.tables[side]]
        if side == 0 and plan.probe_filter is not None:
            stream = stream.filter(_labelled(plan.probe_filter, f"WHERE ({plan.tables[0]})"))
        keys = plan.keys[side]
        keyed.append(stream.key_by(_labelled(key_selector(keys), "|".join(keys))))
    fn = LookupJoin(plan) if plan.lookup else TemporalJoin(plan)
    joined = keyed[0].connect(keyed[1]).process(fn, name=plan.name)
    return with_late_output(joined)


def _only_table(tables: Mapping[str, DataStream], name: str) -> DataStream:
    """The stream a MATCH_RECOGNIZE view reads: its query names it, but one table is all it
    may read, so the mapping's only one."""
    if len(tables) != 1:
        raise SqlError(f"job.sql({name!r}): a MATCH_RECOGNIZE view reads one table")
    return next(iter(tables.values()))
