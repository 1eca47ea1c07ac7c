"""The SELECT list of a windowed query: GROUP BY columns and window bounds pass through (as the
result's ``key``, ``start`` and ``end``); every other column is an aggregate, named by its alias
(or, for a plain column, ``sum_value``, ``count``, ``count_distinct_id``, …). ``window_time``
(``TUMBLE_ROWTIME(…)`` and its siblings in a legacy group window) is a field of its own, the
window's end - 1; ``CAST(<aggregate> AS <type>)`` converts an aggregate's result.

SQL's rules hold: ``SUM``, ``MIN``, ``MAX`` and ``AVG`` pass over NULLs (NULL when every value
is), ``COUNT(x)`` counts the non-NULL values, ``COUNT(*)`` every row, and ``AVG`` over integers
is an integer (``agg.avg``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from weir.engine import agg
from weir.engine.agg import AggregateFunction
from weir.engine.nodes import RESERVED_FIELDS
from weir.engine.sql import windowing
from weir.engine.sql.aggregates import Called, Cast, CountDistinct
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.functions import cast_name
from weir.engine.sql.query import (
    AGGREGATE_NAMES,
    BUILTIN_AGGREGATES,
    Query,
    QueryPlan,
    TableDef,
    at,
    refuse_clauses,
)
from weir.engine.sql.toir import to_ir
from weir.engine.sql.windowing import WINDOW_COLUMNS


class _Select(Query):
    def plan(self, name: str, lateness_ms: int | None) -> QueryPlan:
        key_fields = self.key_fields()
        group_sql = {i.sql(WeirFlink) for i in self.group}
        aggregates: dict[str, Any] = {}
        for item in self.select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if self._passes_through(node, group_sql):
                continue
            field_name, aggregate = self._aggregate(node, item)
            if field_name in aggregates:
                raise SqlError(f"two SELECT columns are named {field_name!r}; rename one (AS …)")
            aggregates[field_name] = aggregate
        if not aggregates:
            raise SqlUnsupported(
                f"view {name!r} selects no aggregate; a windowed query computes at least one "
                f"({AGGREGATE_NAMES} or a CREATE FUNCTION aggregate)"
            )
        where = self.select.args.get("where")
        columns = self._columns(group_sql) if self.window is None else {}
        return QueryPlan(
            name=name,
            table=self.table.name,
            sql=self.select.sql(WeirFlink),
            where=self.compiler.predicate(where.this) if where is not None else None,
            where_sql=where.this.sql(WeirFlink) if where is not None else None,
            derived=self.derived,
            key_fields=key_fields,
            window=self.window,
            allowed_lateness_ms=(
                self.table.allowed_lateness_ms if lateness_ms is None else lateness_ms
            ),
            aggregates=aggregates,
            columns=columns,
            where_ir=to_ir(where.this, self._resolve) if where is not None else None,
        )

    def _columns(self, group_sql: set[str]) -> dict[str, str]:
        """A continuous aggregate's GROUP BY columns in its SELECT: output name -> field."""
        out: dict[str, str] = {}
        for item in self.select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if node.sql(WeirFlink) not in group_sql:
                continue
            name = item.alias if isinstance(item, exp.Alias) else _plain_name(node)
            if name in _changelog_fields():
                raise SqlError(
                    f"{item.sql(WeirFlink)}: {name!r} is a field of every changelog row "
                    "(op, key, row_kind); name the column something else (AS …)"
                )
            out[name] = self._resolve(node) if isinstance(node, exp.Column) else self._derive(node)
        return out

    def _passes_through(self, node: exp.Expr, group_sql: set[str]) -> bool:
        """Is ``node`` a key column or a window bound (part of every result as key/start/end)?"""
        if isinstance(node, exp.Star):
            raise SqlUnsupported("SELECT *: name the key columns, window bounds and aggregates")
        if self.window is None and _windowing(node):
            raise SqlUnsupported(
                f"{node.sql(WeirFlink)}{at(node)}: a query grouped without a window has no "
                "window bounds; group by a window TVF's window_start, window_end to have them"
            )
        if isinstance(node, exp.Column) and node.name in WINDOW_COLUMNS:
            if self.window is None or not self.window.from_tvf:
                raise SqlUnsupported(
                    f"{node.sql(WeirFlink)}{at(node)}: a result has window_start, window_end "
                    "and window_time with a window TVF, TUMBLE_START/TUMBLE_END/TUMBLE_ROWTIME "
                    "(…) with a legacy group window"
                )
            return node.name != "window_time"  # window_time is a field of its own
        bound = windowing.LEGACY_BOUNDS.get(windowing.function_name(node))
        if bound is not None:
            self._check_bound(node, bound[0])
            return True
        return node.sql(WeirFlink) in group_sql

    def _check_bound(self, node: exp.Expr, kind: str, suffixes: str = "START/{k}_END") -> None:
        spec = self.window
        if spec is None:  # refused by _passes_through before a bound is checked
            raise SqlUnsupported(f"{node.sql(WeirFlink)}{at(node)}: the query has no window")
        args = node.expressions if isinstance(node, exp.Anonymous) else []
        same = exp.Anonymous(this=kind, expressions=[a.copy() for a in args]).sql(WeirFlink)
        if spec.from_tvf or kind != spec.kind or same != spec.sql:
            raise SqlError(
                f"{node.sql(WeirFlink)}{at(node)} does not match the query's window {spec.sql}; "
                f"write {spec.kind}_{suffixes.format(k=spec.kind)} with the same arguments"
            )

    def _aggregate(self, node: exp.Expr, item: exp.Expr) -> tuple[str, Any]:
        if self.window is None and _windowing(node):
            self._passes_through(node, set())  # refused there, with the reason
        if isinstance(node, exp.Column) and node.name == "window_time":
            return self._named(item, "window_time"), agg.window_time()
        fname = windowing.function_name(node)
        rowtime = windowing.LEGACY_ROWTIME.get(fname)
        if rowtime is not None:
            self._check_bound(node, rowtime, "ROWTIME")
            return self._named(item, "window_time"), agg.window_time()
        if isinstance(node, exp.Cast) and _aggregating(node.this):
            return self._cast(node, item)
        udaf = self.functions.get(fname.lower()) if fname else None
        if udaf is not None:
            return self._udaf(node, item, fname, udaf)
        if isinstance(node, exp.Count):
            return self._count(node, item)
        kind = BUILTIN_AGGREGATES.get(type(node))
        if kind is None:
            raise self._not_an_aggregate(node, fname)
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise SqlUnsupported(
                f"{node.sql(WeirFlink)}: DISTINCT is supported in COUNT(DISTINCT …) only"
            )
        if isinstance(arg, exp.Column):
            return self._named(item, f"{fname.lower()}_{arg.name}"), agg.Builtin(
                kind, self._resolve(arg), "skip"
            )
        return self._named(item, None), agg.Builtin(kind, self._derive(arg), "skip")

    def _cast(self, node: exp.Cast, item: exp.Expr) -> tuple[str, Any]:
        """``CAST(<aggregate> AS <type>)``: the aggregate, its result converted."""
        to = cast_name(node)
        name, inner = self._aggregate(node.this, exp.Alias(this=node.this, alias=item.alias)
                                      if isinstance(item, exp.Alias) else node.this)  # fmt: skip
        if isinstance(inner, agg.Builtin):
            return name, agg.cast(inner, to)
        return name, agg.custom(Cast(inner.function, to, node.sql(WeirFlink)))

    def _count(self, node: exp.Count, item: exp.Expr) -> tuple[str, Any]:
        arg = node.this
        if arg is None or isinstance(arg, exp.Star) or _not_null_literal(arg):
            return self._named(item, "count"), agg.count()
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise SqlUnsupported(
                    f"{node.sql(WeirFlink)}: COUNT(DISTINCT …) takes one expression"
                )
            inner = arg.expressions[0]
            auto = f"count_distinct_{inner.name}" if isinstance(inner, exp.Column) else None
            return self._named(item, auto), agg.custom(
                CountDistinct(self.compiler.compile(inner), node.sql(WeirFlink))
            )
        if isinstance(arg, exp.Column):
            return self._named(item, f"count_{arg.name}"), agg.count(self._resolve(arg))
        return self._named(item, None), agg.count(self._derive(arg))

    def _udaf(
        self, node: exp.Expr, item: exp.Expr, fname: str, udaf: AggregateFunction
    ) -> tuple[str, Any]:
        args = _call_args(node)
        if not args or (len(args) == 1 and isinstance(args[0], exp.Star)):
            return self._named(item, fname.lower()), agg.custom(
                Called(udaf, None, node.sql(WeirFlink))
            )
        fns = [self.compiler.compile(a) for a in args]
        if len(fns) == 1:
            argument = fns[0]
        else:
            argument = lambda r: tuple(f(r) for f in fns)  # noqa: E731 - one closure
        auto = f"{fname.lower()}_{args[0].name}" if isinstance(args[0], exp.Column) else None
        return self._named(item, auto if len(args) == 1 else None), agg.custom(
            Called(udaf, argument, node.sql(WeirFlink))
        )

    def _not_an_aggregate(self, node: exp.Expr, fname: str) -> SqlError:
        registered = ", ".join(sorted(self.functions)) or "none (CREATE FUNCTION name AS …)"
        if fname and isinstance(node, exp.AggFunc | exp.Anonymous):
            return SqlError(
                f"unknown aggregate function {fname}{at(node)} in "
                f"{node.sql(WeirFlink)}; weir's SQL has "
                f"{AGGREGATE_NAMES} and the registered {registered}"
            )
        return SqlUnsupported(
            f"SELECT {node.sql(WeirFlink)}{at(node)}: a windowed result holds its "
            "GROUP BY columns (as "
            "its key), the window bounds and aggregates; group by this expression, or "
            f"aggregate it ({AGGREGATE_NAMES}, registered: {registered})"
        )

    def _named(self, item: exp.Expr, auto: str | None) -> str:
        if isinstance(item, exp.Alias):
            name = item.alias
        elif auto is not None:
            name = auto
        else:
            raise SqlError(
                f"{item.sql(WeirFlink)} needs a name for its result field: "
                f"{item.sql(WeirFlink)} AS name"
            )
        if self.window is None and name in _changelog_fields():
            raise SqlError(
                f"{item.sql(WeirFlink)}: {name!r} is a field of every changelog row "
                "(op, key, row_kind); "
                "name the column something else"
            )
        if self.window is not None and name in RESERVED_FIELDS:
            raise SqlError(
                f"{item.sql(WeirFlink)}: {name!r} is a field every window result has "
                "(op, key, start, end, "
                "final); name the column something else"
            )
        return name


def _windowing(node: exp.Expr) -> bool:
    """Is ``node`` a window bound or time (a window column, ``TUMBLE_START(…)``, …)?"""
    if isinstance(node, exp.Column):
        return node.name in WINDOW_COLUMNS
    name = windowing.function_name(node)
    return name in windowing.LEGACY_BOUNDS or name in windowing.LEGACY_ROWTIME


def _plain_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Column):
        return node.name
    raise SqlError(f"{node.sql(WeirFlink)} needs a name for its result column: … AS name")


def _aggregating(node: exp.Expr) -> bool:
    """Is ``node`` an aggregate call (built-in or not: a call weir cannot run per record)?"""
    return isinstance(node, exp.AggFunc | exp.Anonymous)


def _not_null_literal(node: exp.Expr) -> bool:
    """``COUNT(1)``, ``COUNT('x')``: a constant that is never NULL counts every row."""
    return isinstance(node, exp.Literal | exp.Boolean)


def _call_args(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out: list[exp.Expr] = []
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, list):
            out.extend(value)
        elif isinstance(value, exp.Expr):
            out.append(value)
    return out


def plan_query(
    statement: exp.Expr,
    name: str,
    tables: Mapping[str, TableDef],
    functions: Mapping[str, AggregateFunction],
    lateness_ms: int | None = None,
) -> QueryPlan:
    """The plan of view ``name``'s query; ``lateness_ms`` overrides the table's lateness."""
    select = refuse_clauses(statement)
    return _Select(select, tables, functions).plan(name, lateness_ms)


def _changelog_fields() -> frozenset[str]:
    """The fields of a continuous aggregate's rows; its module loads with a windowless view."""
    from weir.engine.sql.continuous import CHANGELOG_FIELDS

    return CHANGELOG_FIELDS
