"""One windowed ``SELECT … GROUP BY`` compiled to the job API's steps:

    WHERE                       -> filter (a closure over the record)
    aggregate arguments that    -> map (adds a derived field per expression)
      are expressions
    GROUP BY columns            -> key_by (one column, or their composite key, ``keys.py``)
    the window (TVF or legacy)  -> window(assigner, allowed lateness)
    COUNT/SUM/MIN/MAX/AVG/UDAF  -> aggregate(name, **fields) (``agg``'s built-ins where they
                                   fit, so the generated folds and Spark's native path run them)

Anything the runtime would run with another meaning is refused with the construct named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from weir.engine.agg import AggregateFunction, BuiltinKind
from weir.engine.kernels import ir
from weir.engine.sql import windowing
from weir.engine.sql.dialect import WeirFlink, position
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.scalar import Compiler, Fn
from weir.engine.sql.windowing import WINDOW_COLUMNS, WindowSpec

# SQL's aggregates pass over NULLs (``nulls="skip"``); AVG is SQL's (integral over integers)
BUILTIN_AGGREGATES: dict[type[exp.Expr], BuiltinKind] = {
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
}
AGGREGATE_NAMES = "COUNT, COUNT(DISTINCT …), SUM, MIN, MAX, AVG"
DERIVED_PREFIX = "__sql_"


@dataclass(frozen=True)
class TableDef:
    """A table a query reads: its columns (None: not declared, any column reads, NULL when a
    record lacks it), its time attribute, its allowed lateness and its primary key."""

    name: str
    columns: tuple[str, ...] | None
    time_column: str | None
    allowed_lateness_ms: int = 0
    primary_key: tuple[str, ...] | None = None  # a versioned table's (temporal joins)
    proctime: str | None = None  # a column declared ``AS PROCTIME()`` (lookup joins)


@dataclass
class QueryPlan:
    name: str
    table: str
    sql: str
    where: Fn | None
    where_sql: str | None
    derived: dict[str, tuple[Fn, str]]  # field -> (closure, its SQL)
    key_fields: tuple[str, ...]
    window: WindowSpec | None  # None: a continuous aggregate (``GROUP BY`` without a window)
    allowed_lateness_ms: int
    aggregates: dict[str, Any] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)  # GROUP BY column -> record field
    where_ir: ir.Expr | str | None = None  # the WHERE as IR, or why it is not (``toir``)


def at(node: exp.Expr) -> str:
    """`` (line L, column C)`` when the parser recorded where ``node`` is."""
    where = position(node)
    return f" (line {where[0]}, column {where[1]})" if where else ""


def refuse_clauses(select: exp.Expr) -> exp.Select:
    if not isinstance(select, exp.Select):
        raise SqlUnsupported(
            f"{type(select).__name__.upper()} ({select.sql(WeirFlink)[:60]}): a view is one SELECT "
            "… GROUP BY over a window"
        )
    refusals = {
        "joins": (
            "JOIN: a query reads one table; join streams with the job API (a.join(b) or "
            "a.key_by(...).interval_join(...), see the README's Joins)"
        ),
        "order": "ORDER BY on an unbounded stream: windows are emitted as the watermark passes "
        "them; sort the results where you read them",
        "limit": "LIMIT on an unbounded stream: the stream has no end to count from",
        "offset": "OFFSET on an unbounded stream: the stream has no end to count from",
        "having": "HAVING: every window's aggregates are kept and served; filter them where "
        "you read them",
        "distinct": "SELECT DISTINCT: a windowed GROUP BY already emits one row per key and window",
        "with_": "WITH (a common table expression): define a table with CREATE TABLE and read "
        "it in the query",
    }
    for arg, message in refusals.items():
        if select.args.get(arg):
            raise SqlUnsupported(f"{message} (in {select.sql(WeirFlink)[:80]}…)")
    over = next(select.find_all(exp.Window), None)  # named first, even inside a subquery
    if over is not None:
        raise SqlUnsupported(
            f"{over.sql(WeirFlink)}: OVER windows are not supported (but ROW_NUMBER() in the "
            "Top-N and deduplication forms); use a window TVF"
        )
    for node in select.walk():
        if isinstance(node, exp.Subquery | exp.Union) or (
            isinstance(node, exp.Select) and node is not select
        ):
            raise SqlUnsupported(
                f"subquery {node.sql(WeirFlink)[:60]}: weir's SQL reads one table; put "
                "the condition "
                "in this query's WHERE"
            )
    return select


class Query:
    def __init__(
        self,
        select: exp.Select,
        tables: Mapping[str, TableDef],
        functions: Mapping[str, AggregateFunction],
    ) -> None:
        self.select = select
        self.functions = {k.lower(): v for k, v in functions.items()}
        self.derived: dict[str, tuple[Fn, str]] = {}
        self.table, self.alias, tvf = self._from(tables)
        self.compiler = Compiler(self._resolve)
        self.window, self.group = self._window(tvf)

    def _from(self, tables: Mapping[str, TableDef]) -> tuple[TableDef, str, WindowSpec | None]:
        source = self.select.args.get("from_")
        if source is None or not isinstance(source.this, exp.Table):
            raise SqlError(f"{self.select.sql(WeirFlink)[:80]}: the query needs FROM a table")
        table = source.this
        found = windowing.tvf(table.this)
        name, spec = found if found is not None else (table.name, None)
        if name not in tables:
            known = ", ".join(sorted(tables)) or "none (declare one with CREATE TABLE)"
            raise SqlError(f"unknown table {name!r}{at(table)}; tables: {known}")
        return tables[name], table.alias or name, spec

    def _resolve(self, col: exp.Column) -> str:
        if col.table and col.table not in (self.table.name, self.alias):
            raise SqlError(
                f"column {col.sql(WeirFlink)}{at(col)} names table {col.table!r}, which the "
                f"query does not read; it reads {self.table.name!r}"
            )
        name = col.name
        if name in self.derived:
            return name
        if name in WINDOW_COLUMNS:
            raise SqlUnsupported(
                f"{name}{at(col)} exists only after windowing: use it in SELECT and GROUP BY, "
                "not in WHERE or inside an expression"
            )
        columns = self.table.columns
        if columns is not None and name not in columns:
            import difflib  # for an unknown column only

            near = difflib.get_close_matches(name, columns, n=3)
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            raise SqlError(
                f"unknown column {name!r}{at(col)} in table {self.table.name!r}; {hint}"
                f"its columns: {', '.join(columns)}"
            )
        return name

    # -- the window and the key -----------------------------------------------------------

    def _window(self, tvf: WindowSpec | None) -> tuple[WindowSpec | None, list[exp.Expr]]:
        group = self.select.args.get("group")
        items: list[exp.Expr] = list(group.expressions) if group is not None else []
        legacy = [(i, w) for i in items if (w := windowing.legacy(i)) is not None]
        if tvf is not None and legacy:
            raise SqlUnsupported(
                f"GROUP BY {legacy[0][0].sql(WeirFlink)} with FROM "
                f"TABLE({tvf.kind}(…)): a query uses "
                "either a window table-valued function or a legacy group window, not both"
            )
        if len(legacy) > 1:
            raise SqlUnsupported("GROUP BY with two group windows: a query has one window")
        if tvf is not None:
            names = {i.name for i in items if isinstance(i, exp.Column)}
            if {"window_start", "window_end"} <= names:
                rest = [i for i in items if not _is_window_column(i)]
                return self._time_checked(tvf), rest
        elif legacy:
            return self._time_checked(legacy[0][1]), [i for i in items if i is not legacy[0][0]]
        else:
            return None, items  # a continuous aggregate: one current row per key
        raise SqlUnsupported(
            f"FROM TABLE({tvf.kind}(…)) grouped without window_start and window_end: group by "
            "both (a windowed aggregate), or read the table itself, FROM t (a continuous one)"
        )

    def _time_checked(self, spec: WindowSpec) -> WindowSpec:
        time_col = self.table.time_column
        if spec.time_column != time_col:
            declared = (
                f"its time attribute is {time_col!r} (WATERMARK FOR {time_col} …)"
                if time_col
                else "it declares none (WATERMARK FOR <column> AS … in CREATE TABLE, or a field "
                "name as the source's timestamp in Python)"
            )
            raise SqlError(
                f"{spec.sql}: the window is on {spec.time_column!r}, not a time attribute of "
                f"table {self.table.name!r}; {declared}"
            )
        return spec

    def key_fields(self) -> tuple[str, ...]:
        fields = []
        for item in self.group:
            if isinstance(item, exp.Cube | exp.Rollup | exp.GroupingSets):
                raise SqlUnsupported(
                    f"GROUP BY {item.sql(WeirFlink)}: a view is one grouping (one operator, one "
                    "key); write one view per grouping set"
                )
            if isinstance(item, exp.Column):
                fields.append(self._resolve(item))
            else:
                fields.append(self._derive(item))
        spec = self.window
        if spec is None:
            return tuple(fields)
        if spec.kind == "SESSION" and spec.partition_by is not None:
            if set(spec.partition_by) != {_name(i) for i in self.group}:
                raise SqlUnsupported(
                    f"{spec.sql}: PARTITION BY {', '.join(spec.partition_by)} differs from the "
                    "GROUP BY columns; weir's sessions are per key: partition by the GROUP BY "
                    "columns"
                )
        elif spec.kind == "SESSION" and spec.from_tvf and self.group:
            raise SqlUnsupported(
                f"{spec.sql}: SESSION without PARTITION BY merges every key's events into one "
                "session; weir's sessions are per key: add PARTITION BY "
                f"{', '.join(i.sql(WeirFlink) for i in self.group)}"
            )
        return tuple(fields)

    def _derive(self, node: exp.Expr) -> str:
        """A field holding ``node``'s value, computed by the map step."""
        sql = node.sql(WeirFlink)
        for name, (_, text) in self.derived.items():
            if text == sql:
                return name
        fn = self.compiler.compile(node)
        name = f"{DERIVED_PREFIX}{len(self.derived)}"
        self.derived[name] = (fn, sql)
        return name


def _name(node: exp.Expr) -> str:
    return node.name if isinstance(node, exp.Column) else node.sql(WeirFlink)


def _is_window_column(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.name in WINDOW_COLUMNS
