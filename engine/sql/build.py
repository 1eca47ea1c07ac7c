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

from weir.engine.agg import AggregateFunction
from weir.engine.sql.dialect import parse, too_deep
from weir.engine.sql.errors import SqlError
from weir.engine.sql.keys import key_selector
from weir.engine.sql.query import QueryPlan, TableDef
from weir.engine.sql.recognize import attach_match, is_match_recognize
from weir.engine.sql.scalar import Fn
from weir.engine.sql.select import plan_query

if TYPE_CHECKING:
    from weir.engine.job import DataStream, Job, ResultStream

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


def attach(plan: QueryPlan, stream: DataStream) -> ResultStream:
    """Add the plan's filter, map, key_by, window and aggregate to ``stream``."""
    if plan.where is not None:
        stream = stream.filter(_labelled(plan.where, f"WHERE {plan.where_sql}"))
    if plan.derived:
        label = ", ".join(f"{n} = {sql}" for n, (_, sql) in plan.derived.items())
        stream = stream.map(_labelled(_deriver(plan.derived), label))
    key = key_selector(plan.key_fields) if plan.key_fields else (lambda r: GLOBAL_KEY)
    _labelled(key, "|".join(plan.key_fields) or GLOBAL_KEY)
    return (
        stream.key_by(key)
        .window(plan.window.assigner(), allowed_lateness_ms=plan.allowed_lateness_ms)
        .aggregate(plan.name, **plan.aggregates)
    )


def add_view(
    job: Job,
    name: str,
    query: str,
    *,
    tables: Mapping[str, DataStream],
    functions: Mapping[str, AggregateFunction] | None = None,
    allowed_lateness_ms: int = 0,
) -> ResultStream:
    """Compile ``query`` (one SELECT) over the streams ``tables`` names, as operator ``name``.
    A Python table has no declared columns; its time attribute is the source's ``timestamp``
    field."""
    if not job.sources:
        raise SqlError(f"job.sql({name!r}): call job.source(...) first; the query reads it")
    ts = job.sources[0].timestamp
    if any(s.timestamp != ts for s in job.sources):
        raise SqlError(
            f"job.sql({name!r}): the job's sources take their time from different fields; a "
            "query's time attribute is one field: give every source the same timestamp= "
            "(or use the DataStream API)"
        )
    defs = {
        t: TableDef(t, None, ts if isinstance(ts, str) else None, allowed_lateness_ms)
        for t in tables
    }
    statements = parse(query, f"job.sql({name!r})")
    if len(statements) != 1:
        raise SqlError(f"job.sql({name!r}) takes one SELECT; it has {len(statements)} statements")
    if is_match_recognize(statements[0]):
        stream = _only_table(tables, name)
        return attach_match(statements[0], name, defs, stream)
    try:
        plan = plan_query(statements[0], name, defs, functions or {})
    except RecursionError:  # a long chain of operators compiles recursively
        raise too_deep(f"job.sql({name!r})") from None
    return attach(plan, tables[plan.table])


def _only_table(tables: Mapping[str, DataStream], name: str) -> DataStream:
    """The stream a MATCH_RECOGNIZE view reads: its query names it, but one table is all it
    may read, so the mapping's only one."""
    if len(tables) != 1:
        raise SqlError(f"job.sql({name!r}): a MATCH_RECOGNIZE view reads one table")
    return next(iter(tables.values()))
