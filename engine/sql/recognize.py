"""``MATCH_RECOGNIZE`` (Flink SQL's row pattern recognition) compiled to a CEP pattern
operator (``weir.engine.cep``)::

    SELECT * FROM events MATCH_RECOGNIZE (
        PARTITION BY id ORDER BY ts
        MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS bottom, C.price AS end_price
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B+ C)
        DEFINE B AS B.price < A.price, C AS C.price > A.price
    )

What is supported, as Flink runs it:

- ``PARTITION BY`` columns (the operator's key; none: one key) and ``ORDER BY`` the table's
  time attribute (event time);
- ``PATTERN``: a sequence of variables, each with ``*``, ``+``, ``?``, ``{n}``, ``{n,}``,
  ``{n,m}`` and a trailing ``?`` for reluctant; consecutive rows (SQL's row pattern is strict
  contiguity); the quantifiers are greedy unless reluctant, except on the last variable
  (Flink's rule);
- ``DEFINE``: a condition per variable (one without is always true), in weir's scalar SQL;
  ``col`` or ``V.col`` of the variable ``V`` being defined reads the current row, another
  variable's ``X.col`` X's last row so far; ``FIRST``/``LAST`` with logical offsets,
  aggregates and ``PREV`` (``navigation.py``);
- ``MEASURES``: expressions over ``X.col`` (X's last row), ``FIRST``/``LAST`` with offsets,
  ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG`` of ``X.col``, ``MATCH_ROWTIME()``;
- ``WITHIN INTERVAL '…' unit`` after ``PATTERN``: the match's first and last rows at most that
  far apart (the pattern's ``within``);
- ``ONE ROW PER MATCH``; ``AFTER MATCH SKIP`` ``PAST LAST ROW``, ``TO NEXT ROW`` (the
  default), ``TO FIRST v``, ``TO LAST v``.

The output row holds the partition columns and the measures, at the match's time. Anything else
(alternation, groups, ``ALL ROWS PER MATCH``, ``NEXT``) is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from sqlglot import exp

from weir.base.errors import MalformedPatternError
from weir.engine.cep import AfterMatchSkipStrategy, Pattern
from weir.engine.results import ResultStream
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.keys import key_selector
from weir.engine.sql.navigation import Scope, getter
from weir.engine.sql.query import TableDef
from weir.engine.sql.scalar import Compiler
from weir.engine.sql.windowing import interval_ms
from weir.engine.streams import DataStream

Match = dict[str, list[Any]]
_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\*|\+|\?|\{(\d*)(,?)(\d*)\})?(\?)?")


def is_match_recognize(statement: exp.Expr) -> TypeGuard[exp.Select]:
    """Does the query read its table through ``MATCH_RECOGNIZE``?"""
    return isinstance(statement, exp.Select) and statement.args.get("match") is not None


def attach_match(
    statement: exp.Select, name: str, tables: Mapping[str, TableDef], stream: DataStream
) -> ResultStream:
    """Compile ``statement`` (a ``SELECT … FROM t MATCH_RECOGNIZE (…)``) onto ``stream``, as
    the pattern operator ``name``."""
    mr: exp.MatchRecognize = statement.args["match"]
    table = _table(statement, tables)
    _check_select(statement, mr)
    _check_order(mr, table)
    keys = [_plain_column(c, "PARTITION BY") for c in mr.args.get("partition_by") or []]
    time_column = table.time_column or ""  # set: _check_order orders by it
    pattern = _pattern(mr, time_column)
    scope = Scope(tuple(pattern.names()), time_column)
    measures = [_measure(m, scope) for m in mr.args.get("measures") or []]

    def select(match: Match) -> dict[str, Any]:
        first = next(rows[0] for rows in match.values() if rows)
        row = {k: first.get(k) for k in keys}
        row.update({alias: fn(match) for alias, fn in measures})
        return row

    key = key_selector(keys) if keys else (lambda r: "*")
    key.__qualname__ = ", ".join(keys) or "* (no PARTITION BY: one key)"  # for weir explain
    keyed = stream.key_by(key)
    try:
        return keyed.pattern(pattern).select(select, name=name)
    except MalformedPatternError as exc:
        raise SqlError(f"MATCH_RECOGNIZE of view {name!r}: {exc}") from None


def _table(statement: exp.Select, tables: Mapping[str, TableDef]) -> TableDef:
    source = statement.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        raise SqlError("MATCH_RECOGNIZE needs FROM a table")
    name = source.this.name
    if name not in tables:
        raise SqlError(f"unknown table {name!r}; tables: {', '.join(sorted(tables)) or 'none'}")
    return tables[name]


def _check_select(statement: exp.Select, mr: exp.MatchRecognize) -> None:
    for arg in ("where", "group", "joins", "order", "limit", "having", "distinct"):
        if statement.args.get(arg):
            raise SqlUnsupported(
                f"{arg.upper()} with MATCH_RECOGNIZE: select the match's columns as they are"
            )
    if not all(isinstance(e, exp.Star | exp.Column) for e in statement.expressions):
        raise SqlUnsupported(
            "MATCH_RECOGNIZE's SELECT list: SELECT * or the partition and measure columns; "
            "compute expressions in MEASURES"
        )
    rows = str(mr.args.get("rows") or "ONE ROW PER MATCH").upper()
    if rows != "ONE ROW PER MATCH":
        raise SqlUnsupported(f"{rows}: weir's MATCH_RECOGNIZE emits ONE ROW PER MATCH (Flink's)")


def _check_order(mr: exp.MatchRecognize, table: TableDef) -> None:
    order = mr.args.get("order")
    items = list(order.expressions) if order is not None else []
    names = [o.this.name if isinstance(o.this, exp.Column) else o.sql(WeirFlink) for o in items]
    if names != [table.time_column] or any(o.args.get("desc") for o in items):
        raise SqlUnsupported(
            f"MATCH_RECOGNIZE ORDER BY {', '.join(names) or '(none)'}: order by the table's "
            f"time attribute {table.time_column!r}, ascending (rows are matched in event time)"
        )


def _plain_column(node: exp.Expr, where: str) -> str:
    if not isinstance(node, exp.Column):
        raise SqlUnsupported(f"{where} {node.sql(WeirFlink)}: name a column")
    return node.name


# -- PATTERN and DEFINE ---------------------------------------------------------------------


def _pattern(mr: exp.MatchRecognize, time_column: str) -> Pattern:
    text = str(mr.args.get("pattern") or "").strip()
    steps = _steps(text)
    defines = {d.alias: d.this for d in mr.args.get("define") or []}
    names = [s[0] for s in steps]
    for var in defines:
        if var not in names:
            raise SqlError(f"DEFINE {var}: the PATTERN ({text}) has no variable {var}")
    skip = _skip(str(mr.args.get("after") or ""), names)
    pattern: Pattern | None = None
    before = 0  # the rows the pattern guarantees before the variable's first row
    for i, (var, low, high, greedy) in enumerate(steps):
        scope = Scope(tuple(names), time_column, var, before)
        pattern = (Pattern.begin(var, skip) if pattern is None else pattern.next(var)).where(
            _condition(var, defines.get(var), scope)
        )
        _quantify(pattern, low, high)
        if greedy and high != 1 and i < len(steps) - 1:
            pattern.greedy()
        before += low
    assert pattern is not None
    within = mr.args.get("within")
    if within is not None:
        pattern.within(interval_ms(within, "MATCH_RECOGNIZE WITHIN"))
    return pattern


def _steps(text: str) -> list[tuple[str, int, int | None, bool]]:
    """``(variable, low, high (None: unbounded), greedy)`` per variable of the PATTERN."""
    if re.search(r"[|()^$]", text):
        raise SqlUnsupported(
            f"PATTERN ({text}): alternation, groups and anchors are not supported; write a "
            "sequence of variables with quantifiers"
        )
    steps = []
    for token in text.split():
        m = _STEP.fullmatch(token)
        if m is None:
            raise SqlError(f"PATTERN ({text}): cannot read {token!r}")
        var, quant, lo, comma, hi, reluctant = m.groups()
        low, high = {None: (1, 1), "*": (0, None), "+": (1, None), "?": (0, 1)}.get(quant, (0, 0))
        if quant and quant.startswith("{"):
            low = int(lo or 0)
            high = (int(hi) if hi else None) if comma else low
        steps.append((var, low, high, reluctant is None))
    if not steps:
        raise SqlError("MATCH_RECOGNIZE needs a PATTERN of one variable or more")
    return steps


def _quantify(p: Pattern, low: int, high: int | None) -> None:
    if high is None:
        p.times_or_more(max(low, 1)).consecutive()
    elif (low, high) == (0, 1):
        pass
    elif high > 1 or low > 1:
        p.times(max(low, 1), high).consecutive()
    if low == 0:
        p.optional()


def _condition(var: str, node: exp.Expr | None, scope: Scope) -> Callable[[Any, Any], bool]:
    """DEFINE ``var``: ``fn(event, ctx)``. ``col`` and ``var.col`` read the current row, the
    navigations (``navigation.py``) the partial match so far (``ctx.events_of``) with the
    current row as ``var``'s last."""
    if node is None:
        return _any_row
    getters: dict[str, Callable[[Match], Any]] = {}

    def swap(n: exp.Expr) -> exp.Expr:
        found = getter(n, scope)
        if found is None:
            if isinstance(n, exp.Column) and (not n.table or n.table == var):
                return exp.column(n.name)
            return n
        field = f"__d{len(getters)}"
        getters[field] = found
        return exp.column(field)

    fn = Compiler(lambda c: c.name).predicate(node.transform(swap))
    order = scope.order

    def test(e: Any, ctx: Any) -> bool:
        if not getters:
            return bool(fn(e))
        so_far = {v: ctx.events_of(v) for v in order}
        so_far[var] = [*so_far[var], e]  # the current row is var's, as Flink reads it
        return bool(fn({**e, **{f: g(so_far) for f, g in getters.items()}}))

    test.__qualname__ = node.sql(WeirFlink)  # how weir explain shows the condition
    return test


def _any_row(e: Any, ctx: Any) -> bool:
    """A variable without a DEFINE: any row."""
    return True


def _skip(after: str, names: list[str]) -> AfterMatchSkipStrategy:
    text = " ".join(after.upper().split())
    if text in ("", "AFTER MATCH SKIP TO NEXT ROW"):
        return AfterMatchSkipStrategy.skip_to_next()
    if text == "AFTER MATCH SKIP PAST LAST ROW":
        return AfterMatchSkipStrategy.skip_past_last_event()
    m = re.fullmatch(r"AFTER MATCH SKIP TO (FIRST|LAST) (\w+)", " ".join(after.split()), re.I)
    if m is not None:
        var = next((n for n in names if n.upper() == m.group(2).upper()), m.group(2))
        if m.group(1).upper() == "FIRST":
            return AfterMatchSkipStrategy.skip_to_first(var)
        return AfterMatchSkipStrategy.skip_to_last(var)
    raise SqlUnsupported(f"{after}: not an AFTER MATCH clause weir knows")


# -- MEASURES -------------------------------------------------------------------------------


def _measure(node: exp.Expr, scope: Scope) -> tuple[str, Callable[[Match], Any]]:
    """``(alias, fn(match))``: the aggregates and navigations become fields of a row that the
    scalar compiler then reads."""
    inner = node.this if isinstance(node, exp.MatchRecognizeMeasure) else node
    if not isinstance(inner, exp.Alias):
        raise SqlUnsupported(f"MEASURES {inner.sql(WeirFlink)}: give the measure a name (AS …)")
    getters: dict[str, Callable[[Match], Any]] = {}

    def swap(n: exp.Expr) -> exp.Expr:
        found = getter(n, scope)
        if found is None:
            return n
        field = f"__m{len(getters)}"
        getters[field] = found
        return exp.column(field)

    body = inner.this.transform(swap)
    fn = Compiler(lambda c: c.name).compile(body)
    return inner.alias, lambda match: fn({f: g(match) for f, g in getters.items()})
