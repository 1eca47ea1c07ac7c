"""Top-N and deduplication: Flink's ``ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)`` forms,
continuously maintained per partition on a keyed process function.

    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY v DESC) AS rn FROM t)
    WHERE rn <= 3                          -- Top-N: each id's 3 rows of largest v

    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS rn FROM t)
    WHERE rn = 1                           -- deduplication, keep the last row by time
                                           -- (ORDER BY ts ASC: keep the first)

The partition columns are the key (as ``GROUP BY`` columns are); each partition keeps its ranked
rows in the value state ``rows`` (served at ``/{job}/{view}/state/{key}``, ``state.rows``), and
every record that changes the ranking emits an upsert for each rank whose row changed:
``{"op", "key", "row_kind", "rn", <row>}`` (``op`` the view's name; ``row_kind`` ``+I`` for a
rank filled the first time, ``+U`` after); a
consumer keeps the latest row per ``(key, rn)``. Rows equal in the ORDER BY keep their arrival
order (the earlier ranks first, Flink's ``AppendOnlyTopNFunction``), except in the
keep-last deduplication, where a row as late as the kept one replaces it (Flink's
``RowTimeDeduplicateFunction``: ``current >= previous``). A NULL sorts first ascending and last
descending.

Over a window TVF (``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), …))``, ``PARTITION BY
window_start, window_end [, k …]``) the same query is Flink's window Top-N or window
deduplication: ranked per window and emitted once, when the window fires (``WindowRank`` in
``windowed.py``); the partition columns other than the window's are the key. Over a window
aggregate (a subquery grouping a window TVF) it ranks each window's groups: the aggregate and
the ranking are one keyed function (``WindowAggregateRank``), as a result stream feeds no other
operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from weir.engine.agg import AggregateFunction
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.query import TableDef, at
from weir.engine.sql.ranked import RankPlan
from weir.engine.sql.scalar import Compiler
from weir.engine.sql.select import plan_query
from weir.engine.sql.windowed import WindowAggregateRankPlan, WindowRankPlan
from weir.engine.sql.windowing import WINDOW_COLUMNS, WindowSpec, tvf


def is_row_number(statement: exp.Expr) -> bool:
    """Is ``statement`` a ``SELECT … FROM (SELECT …, ROW_NUMBER() OVER (…) …) WHERE rn …``?"""
    inner = _inner(statement)
    return inner is not None and _window(inner) is not None


def _inner(statement: exp.Expr) -> exp.Select | None:
    if not isinstance(statement, exp.Select):
        return None
    source = statement.args.get("from_")
    sub = source.this if source is not None else None
    if isinstance(sub, exp.Subquery) and isinstance(sub.this, exp.Select):
        return sub.this
    return None


def _window(inner: exp.Select) -> tuple[exp.Window, str] | None:
    for item in inner.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Window) and isinstance(node.this, exp.RowNumber):
            if not isinstance(item, exp.Alias):
                raise SqlError(f"{node.sql(WeirFlink)}: name the row number, … AS rn")
            return node, item.alias
    return None


def plan_rank(
    statement: exp.Expr,
    name: str,
    tables: Mapping[str, TableDef],
    functions: Mapping[str, AggregateFunction] | None = None,
) -> RankPlan | WindowRankPlan | WindowAggregateRankPlan:
    """The plan of a Top-N or deduplication view ``name`` (per window over a window TVF or a
    window aggregate; ``functions``: the aggregate's user-defined functions)."""
    inner = _inner(statement)
    found = _window(inner) if inner is not None else None
    if inner is None or found is None or not isinstance(statement, exp.Select):
        raise SqlError(f"view {name!r} is not a ROW_NUMBER() query")
    window, rn = found
    aggregated = _aggregated(inner)
    if aggregated is not None:
        over = _Over(statement, inner, window, rn, name)
        return _plan_aggregate_rank(over, aggregated, tables, functions or {})
    table, spec = _table(inner, tables)
    resolve = _Resolver(table, windowed=spec is not None)
    compiler = Compiler(resolve)
    partition = tuple(
        resolve(c) for c in _columns(window.args.get("partition_by") or [], "PARTITION BY")
    )
    if spec is not None:
        partition = _window_partition(partition, spec)
    order = _order(window, resolve)
    n = _limit(statement.args.get("where"), rn, name)
    keep_last = n == 1 and order == ((table.time_column, True),) and table.time_column is not None
    where = inner.args.get("where")
    plan = RankPlan(
        name=name,
        table=table.name,
        where=compiler.predicate(where.this) if where is not None else None,
        where_sql=where.this.sql(WeirFlink) if where is not None else None,
        partition=partition,
        order=order,
        n=n,
        keep_last=keep_last,
        columns=_projection(statement, inner, rn, resolve),
        rn=rn if _shows(statement, rn) else None,
        sql=statement.sql(WeirFlink),
    )
    if spec is None:
        return plan
    return WindowRankPlan(plan, spec.assigner(), spec.sql)  # type: ignore[arg-type]  # checked


def _window_partition(partition: tuple[str, ...], spec: WindowSpec) -> tuple[str, ...]:
    """A window Top-N's key: its PARTITION BY columns but the window's bounds, which it needs."""
    if not {"window_start", "window_end"} <= set(partition):
        raise SqlUnsupported(
            f"ROW_NUMBER() over {spec.sql}: PARTITION BY window_start, window_end (and the "
            "key columns), Flink's window Top-N; a ranking across windows is not supported"
        )
    if "window_time" in partition:
        raise SqlUnsupported("PARTITION BY window_time: partition by window_start, window_end")
    return tuple(c for c in partition if c not in WINDOW_COLUMNS)


class _Resolver:
    def __init__(self, table: TableDef, *, windowed: bool = False) -> None:
        self.table = table
        self.windowed = windowed

    def __call__(self, col: exp.Column) -> str:
        columns = self.table.columns
        if self.windowed and col.name in WINDOW_COLUMNS:
            return col.name
        if columns is not None and col.name not in columns:
            raise SqlError(
                f"unknown column {col.name!r}{at(col)} in table {self.table.name!r}; its "
                f"columns: {', '.join(columns)}"
            )
        return col.name


def _table(inner: exp.Select, tables: Mapping[str, TableDef]) -> tuple[TableDef, WindowSpec | None]:
    for arg in ("joins", "group", "having", "order", "limit", "with_"):
        if inner.args.get(arg):
            raise SqlUnsupported(
                f"{arg.upper().rstrip('_')} inside a ROW_NUMBER() query: its inner SELECT reads "
                "one table, filtered by WHERE"
            )
    source = inner.args.get("from_")
    if source is not None and isinstance(source.this, exp.Subquery):
        raise SqlUnsupported(
            f"ROW_NUMBER() over a subquery ({source.this.sql(WeirFlink)[:60]}…): rank a "
            "table, a window TVF (TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), …))) or a window "
            "aggregate (SELECT …, window_start, window_end, SUM(…) … GROUP BY window_start, "
            "window_end, …)"
        )
    if source is None or not isinstance(source.this, exp.Table):
        raise SqlError("the inner SELECT of a ROW_NUMBER() query reads FROM a table")
    found = tvf(source.this.this)
    if found is None and not isinstance(source.this.this, exp.Identifier):
        raise SqlUnsupported(
            f"ROW_NUMBER() over {source.this.sql(WeirFlink)[:60]}: rank over a table or a "
            "window TVF, TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL …))"
        )
    name = found[0] if found is not None else source.this.name
    if name not in tables:
        raise SqlError(f"unknown table {name!r}; tables: {', '.join(sorted(tables))}")
    spec = found[1] if found is not None else None
    if spec is not None:
        _check_window(spec, tables[name])
    return tables[name], spec


def _check_window(spec: WindowSpec, table: TableDef) -> None:
    if spec.kind == "SESSION":
        raise SqlUnsupported(
            f"ROW_NUMBER() over {spec.sql}: window Top-N takes TUMBLE, HOP or CUMULATE "
            "windows (SESSION is not supported)"
        )
    if table.time_column is not None and spec.time_column != table.time_column:
        raise SqlError(
            f"{spec.sql}: DESCRIPTOR({spec.time_column}) is not table {table.name!r}'s time "
            f"attribute ({table.time_column})"
        )


def _columns(items: list[exp.Expr], where: str) -> list[exp.Column]:
    for item in items:
        if not isinstance(item, exp.Column):
            raise SqlUnsupported(f"{where} {item.sql(WeirFlink)}: name columns")
    return [i for i in items if isinstance(i, exp.Column)]


def _order(window: exp.Window, resolve: _Resolver) -> tuple[tuple[str, bool], ...]:
    order = window.args.get("order")
    items = list(order.expressions) if order is not None else []
    if not items:
        raise SqlError(f"{window.sql(WeirFlink)}: ROW_NUMBER() needs ORDER BY")
    return tuple(
        (resolve(_columns([o.this], "ORDER BY")[0]), bool(o.args.get("desc"))) for o in items
    )


def _limit(where: exp.Where | None, rn: str, name: str) -> int:
    """N of ``WHERE rn <= N``, ``rn < N + 1`` or ``rn = 1``."""
    cond = where.this if where is not None else None
    ok = isinstance(cond, exp.LTE | exp.LT | exp.EQ) and isinstance(cond.this, exp.Column)
    value = cond.expression if ok and cond is not None else None
    if (
        not ok
        or cond is None
        or cond.this.name != rn
        or not (isinstance(value, exp.Literal) and value.is_int)
    ):
        raise SqlUnsupported(
            f"view {name!r}: a ROW_NUMBER() query is filtered on its row number alone, WHERE "
            f"{rn} <= N (Top-N) or {rn} = 1 (deduplication)"
        )
    n = int(value.this) - (1 if isinstance(cond, exp.LT) else 0)
    if isinstance(cond, exp.EQ) and n != 1:
        raise SqlUnsupported(f"WHERE {rn} = {n}: only {rn} = 1 (deduplication); or {rn} <= N")
    if not 1 <= n <= 1_000:
        raise SqlError(f"WHERE {cond.sql(WeirFlink)}: N must be between 1 and 1000")
    return n


def _shows(statement: exp.Select, rn: str) -> bool:
    return any(
        isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.name == rn)
        for i in statement.expressions
    )


def _projection(
    statement: exp.Select, inner: exp.Select, rn: str, resolve: _Resolver
) -> tuple[str, ...] | None:
    """The row's fields: the outer SELECT's columns (None for ``*`` over an inner ``*``)."""
    outer = [i for i in statement.expressions if not (isinstance(i, exp.Column) and i.name == rn)]
    if any(isinstance(i, exp.Star) for i in outer):
        outer = [i for i in inner.expressions if not isinstance(i, exp.Alias)]
        if any(isinstance(i, exp.Star) for i in outer):
            columns = resolve.table.columns
            if columns is not None and resolve.windowed:
                return (*columns, *WINDOW_COLUMNS)  # a window TVF's rows have its bounds
            return columns
    return tuple(resolve(c) for c in _columns(outer, "SELECT"))


# -- window Top-N of a window aggregate ------------------------------------------------------


@dataclass(frozen=True)
class _Over:
    """The outer query and its ROW_NUMBER() around a window aggregate."""

    statement: exp.Select
    inner: exp.Select
    window: exp.Window
    rn: str
    name: str


def _aggregated(inner: exp.Select) -> exp.Select | None:
    """The window aggregate a ROW_NUMBER() ranks (a subquery with GROUP BY), or None."""
    source = inner.args.get("from_")
    sub = source.this if source is not None else None
    if isinstance(sub, exp.Subquery) and isinstance(sub.this, exp.Select):
        return sub.this if sub.this.args.get("group") else None
    return None


def _plan_aggregate_rank(
    over: _Over,
    aggregate: exp.Select,
    tables: Mapping[str, TableDef],
    functions: Mapping[str, AggregateFunction],
) -> WindowAggregateRankPlan:
    for arg in ("joins", "group", "having", "order", "limit", "with_", "where"):
        if over.inner.args.get(arg):
            raise SqlUnsupported(
                f"{arg.upper().rstrip('_')} beside ROW_NUMBER() over a window aggregate: "
                "filter in the aggregate's WHERE"
            )
    query = plan_query(aggregate, over.name, tables, functions)
    spec = query.window
    if spec is None or not spec.from_tvf:
        raise SqlUnsupported(
            f"view {over.name!r} ranks an aggregate without a window TVF: a Top-N of a "
            "GROUP BY is a window Top-N of a window TVF's aggregate (GROUP BY window_start, "
            "window_end, …)"
        )
    _check_window(spec, tables[query.table])
    if "window_time" in query.aggregates:
        raise SqlUnsupported("window_time in a ranked window aggregate: select window_end")
    groups = group_columns(aggregate)
    outputs = aggregate_outputs(aggregate, groups, tuple(query.aggregates))
    resolve = _Resolver(TableDef(query.table, outputs, None))
    named = _columns(over.window.args.get("partition_by") or [], "PARTITION BY")
    partition = _window_partition(tuple(resolve(c) for c in named), spec)
    by_name = dict(groups)
    unknown = [c for c in partition if c not in by_name]
    if unknown:
        raise SqlUnsupported(
            f"PARTITION BY {', '.join(unknown)}: a window aggregate's ranking partitions by "
            f"its window and GROUP BY columns ({', '.join(by_name) or 'none'})"
        )
    rank = RankPlan(
        name=over.name,
        table=query.table,
        where=None,
        where_sql=None,
        partition=tuple(by_name[c] for c in partition),
        order=_order(over.window, resolve),
        n=_limit(over.statement.args.get("where"), over.rn, over.name),
        keep_last=False,
        columns=_projection(over.statement, over.inner, over.rn, resolve),
        rn=over.rn if _shows(over.statement, over.rn) else None,
        sql=over.statement.sql(WeirFlink),
    )
    return WindowAggregateRankPlan(
        rank=rank,
        assigner=spec.assigner(),  # type: ignore[arg-type]  # not SESSION: checked
        window_sql=spec.sql,
        groups=groups,
        aggregates=query.aggregates,
        where=query.where,
        where_sql=query.where_sql,
        derived=query.derived,
    )


def group_columns(aggregate: exp.Select) -> tuple[tuple[str, str], ...]:
    """The aggregate's GROUP BY columns but the window's: ``(output name, record field)``."""
    aliases = {
        i.this.name: i.alias
        for i in aggregate.expressions
        if isinstance(i, exp.Alias) and isinstance(i.this, exp.Column)
    }
    out = []
    for item in aggregate.args["group"].expressions:
        if not isinstance(item, exp.Column):
            raise SqlUnsupported(
                f"GROUP BY {item.sql(WeirFlink)} in a ranked window aggregate: group by columns"
            )
        if item.name not in WINDOW_COLUMNS:
            out.append((aliases.get(item.name, item.name), item.name))
    return tuple(out)


def aggregate_outputs(
    aggregate: exp.Select, groups: tuple[tuple[str, str], ...], aggregates: tuple[str, ...]
) -> tuple[str, ...]:
    """The aggregate's output columns, in its SELECT's order (an aggregate without an alias
    by its name, ``sum_price``)."""
    named = {field: name for name, field in groups}
    out = []
    for item in aggregate.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(item, exp.Alias):
            out.append(item.alias)
        elif isinstance(node, exp.Column):
            out.append(named.get(node.name, node.name))
    return tuple(dict.fromkeys((*out, *aggregates)))
