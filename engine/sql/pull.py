"""Pull queries: one read-only ``SELECT`` over a job's queryable operators as tables, compiled to
a plan the query API runs on its existing read paths (``api/routes/sql.py``).

A window operator is the table of its windows, one row per key and window: ``key``,
``window_start``, ``window_end``, its aggregates and ``final``. A continuous aggregate view is
the table of its current rows, one per key: ``key``, its GROUP BY columns and aggregates.

    SELECT key, n FROM totals WHERE key IN ('ad-1', 'ad-2')          -> point lookups
    SELECT * FROM impressions WHERE key LIKE 'ad-1%' AND n > 10      -> a key listing by seek
    SELECT key, n FROM totals ORDER BY n DESC LIMIT 10               -> a listing, then sorted
    SELECT COUNT(*), SUM(n) FROM totals                              -> aggregated over the rows

What the plan reads is decided from the WHERE clause's top-level ``AND`` terms: ``key = …`` or
``key IN (…)`` names the keys (point lookups); ``key LIKE 'prefix%'`` bounds a listing to a
prefix; ``window_start`` compared with a number bounds the windows each key answers with. The
whole condition is then evaluated on every row (SQL's three-valued logic, ``scalar.py``), so a
term that does not narrow the read still filters.

Read-only by construction: the text must be one ``SELECT`` of one table (no JOIN, subquery,
set operation, ``INTO`` or DML), and the only functions are the pure scalar ones the job SQL
has (``scalar.SCALAR_FUNCTIONS``) and ``COUNT``/``SUM``/``MIN``/``MAX``/``AVG`` over the whole
result; no function reads a file, the network or code. The text is held to ``MAX_QUERY_CHARS``
and to the job SQL's nesting limit (``dialect.MAX_NESTING``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from weir.engine.sql.dialect import WeirFlink, parse
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.scalar import SCALAR_FUNCTIONS, Compiler, Fn

MAX_QUERY_CHARS = 16_384  # a pull query is one SELECT, typed or generated, never data
SUMMARIES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
}
_PREFIX = re.compile(r"^([^%_\\]*)%$")


@dataclass(frozen=True)
class TableShape:
    """A table a pull query may read: an operator's rows and their columns."""

    name: str
    columns: tuple[str, ...]
    windowed: bool


@dataclass(frozen=True)
class Summary:
    """An aggregate over the whole result: ``kind`` of ``column`` (None: ``COUNT(*)``)."""

    name: str
    kind: str
    column: str | None


@dataclass(frozen=True)
class PullPlan:
    """What a pull query reads and how its rows are shaped.

    ``keys`` (point lookups) or ``prefix`` (a listing) choose the read; ``start_from`` and
    ``start_to`` bound window starts (inclusive); ``where`` keeps a row; ``columns`` project
    it; ``order`` sorts by ``(column, descending)``; ``summaries`` replace the rows by one row
    of aggregates; ``limit`` keeps the first rows."""

    table: str
    keys: tuple[str, ...] | None
    prefix: str
    start_from: int | None
    start_to: int | None
    where: Fn | None
    columns: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int | None
    summaries: tuple[Summary, ...]

    @property
    def whole(self) -> bool:
        """Does the answer need every matching row (sorted or aggregated) before any is sent?"""
        return bool(self.order or self.summaries)


def plan_pull(text: str, tables: Mapping[str, TableShape]) -> PullPlan:
    """The plan of pull query ``text`` over ``tables``.

    Raises:
        SqlSyntaxError: text that does not parse, is too long or nests too deeply.
        SqlUnsupported: anything but a read-only SELECT of one table in the supported forms.
        SqlError: an unknown table or column.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise SqlError(
            f"the query is {len(text):,} characters, more than a pull query may be "
            f"({MAX_QUERY_CHARS:,}); ask for fewer keys at a time"
        )
    statements = parse(text, "query")
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        raise SqlUnsupported(
            "a pull query is one SELECT over one of the job's operators (read-only); "
            f"got {len(statements)} statement(s): {text[:60]!r}"
        )
    select = statements[0]
    _refuse_clauses(select)
    table = _table(select, tables)
    return _Planner(select, table).plan()


def _refuse_clauses(select: exp.Select) -> None:
    refused = {
        "joins": "JOIN", "group": "GROUP BY", "having": "HAVING", "with_": "WITH",
        "distinct": "DISTINCT", "offset": "OFFSET (page with next_cursor)", "into": "INTO",
    }  # fmt: skip
    for arg, what in refused.items():
        if select.args.get(arg):
            raise SqlUnsupported(
                f"{what} in a pull query: it reads one operator's rows, filtered (WHERE), "
                "sorted (ORDER BY … LIMIT) or aggregated over the whole result"
            )
    for node in select.walk():
        if node is not select and isinstance(node, exp.Select | exp.Subquery | exp.Union):
            raise SqlUnsupported(
                f"subquery {node.sql(WeirFlink)[:60]}: a pull query reads one table"
            )
        if isinstance(node, exp.Window):
            raise SqlUnsupported(f"{node.sql(WeirFlink)[:60]}: OVER is not part of a pull query")


def _table(select: exp.Select, tables: Mapping[str, TableShape]) -> TableShape:
    source = select.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table) or source.this.args.get("db"):
        raise SqlUnsupported("a pull query reads FROM one of the job's operators by its name")
    if not isinstance(source.this.this, exp.Identifier):
        raise SqlUnsupported(
            f"FROM {source.this.sql(WeirFlink)[:60]}: a pull query reads FROM one of the job's "
            "operators by its name; table functions are not part of it"
        )
    name = source.this.name
    if name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise SqlError(f"unknown table {name!r}; the job's queryable operators are: {known}")
    return tables[name]


class _Planner:
    def __init__(self, select: exp.Select, table: TableShape) -> None:
        self.select = select
        self.table = table
        alias = select.args["from_"].this.alias
        self.names = {table.name, alias} if alias else {table.name}
        self.compiler = Compiler(self._column)

    def _column(self, col: exp.Column) -> str:
        if col.table and col.table not in self.names:
            raise SqlError(f"column {col.sql(WeirFlink)} names a table the query does not read")
        if col.name not in self.table.columns:
            raise SqlError(
                f"unknown column {col.name!r} in {self.table.name!r}; its columns: "
                f"{', '.join(self.table.columns)}"
            )
        return col.name

    def plan(self) -> PullPlan:
        where = self.select.args.get("where")
        keys, prefix, lo, hi = _access(where.this if where is not None else None)
        columns, summaries = self._projection()
        return PullPlan(
            table=self.table.name,
            keys=keys,
            prefix=prefix,
            start_from=lo if self.table.windowed else None,
            start_to=hi if self.table.windowed else None,
            where=self.compiler.predicate(where.this) if where is not None else None,
            columns=columns,
            order=self._order(columns, summaries),
            limit=self._limit(),
            summaries=summaries,
        )

    def _projection(self) -> tuple[tuple[str, ...], tuple[Summary, ...]]:
        columns: list[str] = []
        summaries: list[Summary] = []
        for item in self.select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star):
                columns.extend(self.table.columns)
            elif isinstance(node, exp.Column):
                columns.append(self._column(node))
            elif type(node) in SUMMARIES:
                summaries.append(self._summary(node, item))
            else:
                raise SqlUnsupported(
                    f"SELECT {node.sql(WeirFlink)[:60]}: a pull query selects columns, * or "
                    f"COUNT/SUM/MIN/MAX/AVG over the result (WHERE may use {SCALAR_FUNCTIONS})"
                )
        if columns and summaries:
            raise SqlUnsupported(
                "a pull query selects either columns or aggregates over the whole result (it "
                "has no GROUP BY: the operator's rows are already grouped by key)"
            )
        return tuple(columns), tuple(summaries)

    def _summary(self, node: exp.Expr, item: exp.Expr) -> Summary:
        kind = SUMMARIES[type(node)]
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise SqlUnsupported(f"{node.sql(WeirFlink)}: DISTINCT is not part of a pull query")
        if kind == "count" and (arg is None or isinstance(arg, exp.Star)):
            column = None
        elif isinstance(arg, exp.Column):
            column = self._column(arg)
        else:
            raise SqlUnsupported(f"{node.sql(WeirFlink)}: aggregate a column of the table")
        name = item.alias if isinstance(item, exp.Alias) else node.sql(WeirFlink).lower()
        return Summary(name, kind, column)

    def _order(
        self, columns: Sequence[str], summaries: Sequence[Summary]
    ) -> tuple[tuple[str, bool], ...]:
        order = self.select.args.get("order")
        if order is None:
            return ()
        if summaries:
            raise SqlUnsupported("ORDER BY with aggregates over the result: the answer is one row")
        out = []
        for o in order.expressions:
            if not isinstance(o.this, exp.Column):
                raise SqlUnsupported(f"ORDER BY {o.this.sql(WeirFlink)}: order by a column")
            out.append((self._column(o.this), bool(o.args.get("desc"))))
        return tuple(out)

    def _limit(self) -> int | None:
        limit = self.select.args.get("limit")
        if limit is None:
            return None
        value = limit.expression
        if not (isinstance(value, exp.Literal) and value.is_int and int(value.this) >= 0):
            raise SqlError(f"LIMIT {value.sql(WeirFlink)}: a whole number")
        return int(value.this)


def _access(
    where: exp.Expr | None,
) -> tuple[tuple[str, ...] | None, str, int | None, int | None]:
    """The keys, key prefix and window-start bounds the WHERE clause's AND terms imply."""
    keys: set[str] | None = None
    prefix, lo, hi = "", None, None
    for term in _conjuncts(where):
        found = _key_terms(term)
        if found is not None:
            keys = found if keys is None else keys & found
            continue
        if isinstance(term, exp.Like) and _is_col(term.this, "key"):
            pattern = _text(term.expression)
            match = _PREFIX.match(pattern) if pattern is not None else None
            if match and len(match.group(1)) > len(prefix):
                prefix = match.group(1)
            continue
        bound = _start_bound(term)
        if bound is not None:
            low, high = bound
            lo = low if lo is None or (low is not None and low > lo) else lo
            hi = high if hi is None or (high is not None and high < hi) else hi
    return (tuple(sorted(keys)) if keys is not None else None), prefix, lo, hi


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _key_terms(term: exp.Expr) -> set[str] | None:
    if isinstance(term, exp.EQ) and _is_col(term.this, "key"):
        value = _text(term.expression)
        return {value} if value is not None else None
    if isinstance(term, exp.In) and _is_col(term.this, "key") and not term.args.get("query"):
        values = [_text(v) for v in term.expressions]
        if all(v is not None for v in values):
            return {v for v in values if v is not None}
    return None


_STARTS: dict[type[exp.Expr], Callable[[int], tuple[int | None, int | None]]] = {
    exp.EQ: lambda v: (v, v),
    exp.GTE: lambda v: (v, None),
    exp.GT: lambda v: (v + 1, None),
    exp.LTE: lambda v: (None, v),
    exp.LT: lambda v: (None, v - 1),
}


def _start_bound(term: exp.Expr) -> tuple[int | None, int | None] | None:
    make = _STARTS.get(type(term))
    if make is None or not _is_col(term.this, "window_start"):
        return None
    value = term.expression
    if isinstance(value, exp.Literal) and value.is_int:
        return make(int(value.this))
    return None


def _is_col(node: exp.Expr, name: str) -> bool:
    return isinstance(node, exp.Column) and node.name == name


def _text(node: exp.Expr) -> str | None:
    return str(node.this) if isinstance(node, exp.Literal) and node.is_string else None


def summarize(summaries: Sequence[Summary], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The one row of ``summaries`` over ``rows`` (SQL's: NULLs skipped, NULL over none)."""
    out: dict[str, Any] = {}
    for s in summaries:
        if s.column is None:  # COUNT(*)
            out[s.name] = len(rows)
            continue
        present: list[Any] = [v for r in rows if (v := r.get(s.column)) is not None]
        if s.kind == "count":
            out[s.name] = len(present)
        elif not present:
            out[s.name] = None
        elif s.kind == "sum":
            out[s.name] = sum(present)
        elif s.kind == "min":
            out[s.name] = min(present)
        elif s.kind == "max":
            out[s.name] = max(present)
        else:
            out[s.name] = sum(present) / len(present)
    return out


def ordered(rows: list[dict[str, Any]], order: Sequence[tuple[str, bool]]) -> list[dict[str, Any]]:
    """``rows`` sorted by ``order``; NULLs first ascending and last descending (Flink's)."""
    for column, desc in reversed(order):
        rows.sort(key=lambda r, c=column: _sort_key(r.get(c)), reverse=desc)  # type: ignore[misc]
    return rows


def _sort_key(value: Any) -> tuple[bool, Any]:
    return (False, 0) if value is None else (True, value)
