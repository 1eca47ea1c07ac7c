"""What ``MATCH_RECOGNIZE``'s ``MEASURES`` and ``DEFINE`` read of a (partial) match
(``recognize.py``), as Flink's ``MatchCodeGenerator`` reads it:

- ``X.col``: X's last row (in ``DEFINE`` of X itself: the current row);
- ``FIRST(X.col, n)`` / ``LAST(X.col, n)``: X's ``n``-th row from the first or the last
  (logical offsets, ``n`` 0 when absent; NULL past the rows there are); without a variable,
  ``FIRST(col, n)`` / ``LAST(col, n)`` count over every row of the match; the argument may be
  an expression over one variable's columns (``FIRST(A.price + A.tax)``);
- ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG`` of ``X.col`` (X's rows) or of ``col`` (every
  row of the match), ``COUNT(*)``; NULLs are left out, as SQL's aggregates leave them;
- ``PREV(col, n)`` in ``DEFINE`` (physical offsets, ``n`` 1 when absent): the row ``n`` rows
  before the current one, where the pattern guarantees that row is part of the match;
- ``MATCH_ROWTIME()`` in ``MEASURES``: the time attribute of the match's last row.

In ``DEFINE`` of X the current row counts as X's (Flink's RUNNING semantics): ``LAST(X.col)``
is the current row's, ``SUM(X.col)`` includes it. A match's rows are its variables' rows in
``PATTERN`` order: the pattern is a sequence of consecutive rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlUnsupported
from weir.engine.sql.scalar import Compiler

Match = dict[str, list[Any]]
Getter = Callable[[Match], Any]
_AGGREGATES: dict[type, Callable[[list[Any]], Any]] = {
    exp.Sum: lambda vs: sum(vs) if vs else None,
    exp.Min: lambda vs: min(vs) if vs else None,
    exp.Max: lambda vs: max(vs) if vs else None,
    exp.Avg: lambda vs: sum(vs) / len(vs) if vs else None,
    exp.Count: len,
}


@dataclass(frozen=True, slots=True)
class Scope:
    """Where an expression is read: the PATTERN's variables in order, the time attribute,
    the variable a DEFINE defines (``None``: MEASURES) and the most rows the pattern keeps
    before that variable's row within the match (how far back ``PREV`` may look)."""

    order: tuple[str, ...]
    time_column: str
    defining: str | None = None
    rows_before: int = 0


def rows(match: Match, var: str, order: tuple[str, ...]) -> list[Any]:
    """The rows of ``var`` (``""``: of the whole match, in order)."""
    if var:
        return match.get(var, [])
    return [r for v in order for r in match.get(v, [])]


def getter(n: exp.Expr, scope: Scope) -> Getter | None:
    """How to read ``n`` from a match, if ``n`` reads one (``None``: an ordinary
    expression, or a column of the current row in a DEFINE).

    Raises:
        SqlUnsupported: navigation weir does not run, named.
    """
    if isinstance(n, exp.Column) and n.table and n.table != scope.defining:
        var, col = n.table, n.name
        return lambda m: m[var][-1].get(col) if m.get(var) else None
    if isinstance(n, exp.First | exp.Last):
        return _first_or_last(n, scope)
    if isinstance(n, exp.Anonymous):
        return _function(n, scope)
    for kind, fold in _AGGREGATES.items():
        if isinstance(n, kind):
            return _aggregate(n, fold, scope)
    if isinstance(n, exp.Column) and scope.defining is None:
        raise SqlUnsupported(
            f"MEASURES column {n.name!r}: name its variable (A.{n.name}, FIRST(A.{n.name}))"
        )
    return None


def _first_or_last(n: exp.First | exp.Last, scope: Scope) -> Getter:
    """``FIRST(expr, k)`` / ``LAST(expr, k)``: ``expr`` on one row of one variable (or of the
    whole match)."""
    offset = _offset(n.expression, n, 0)
    var = _one_variable(n.this, n)
    body = Compiler(lambda c: c.name).compile(_unqualified(n.this))
    index = offset if isinstance(n, exp.First) else -1 - offset
    order = scope.order

    def get(m: Match) -> Any:
        found = rows(m, var, order)
        return body(found[index]) if -len(found) <= index < len(found) else None

    return get


def _function(n: exp.Anonymous, scope: Scope) -> Getter | None:
    name = str(n.this).upper()
    if name == "MATCH_ROWTIME":
        return _match_rowtime(n, scope)
    if name == "NEXT":
        raise SqlUnsupported(
            f"{n.sql(WeirFlink)}: NEXT reads rows after the current one, which a streaming "
            "match has not seen (Flink refuses it too); compare with the previous rows instead "
            "(PREV, LAST(X.col, n))"
        )
    if name == "PREV":
        return _prev(n, scope)
    return None


def _match_rowtime(n: exp.Anonymous, scope: Scope) -> Getter:
    args = n.expressions
    if scope.defining is not None:
        raise SqlUnsupported(f"{n.sql(WeirFlink)} in DEFINE: MATCH_ROWTIME() is a measure")
    if args and not (isinstance(args[0], exp.Column) and args[0].name == scope.time_column):
        raise SqlUnsupported(
            f"{n.sql(WeirFlink)}: MATCH_ROWTIME takes no argument or the time attribute "
            f"{scope.time_column!r}"
        )
    column, order = scope.time_column, scope.order
    return lambda m: found[-1].get(column) if (found := rows(m, "", order)) else None


def _prev(n: exp.Anonymous, scope: Scope) -> Getter:
    """``PREV(col, k)`` in the DEFINE of X: the row ``k`` rows before the current one, when the
    pattern guarantees it is one of the match's (earlier rows are not kept, as in Flink)."""
    shown = n.sql(WeirFlink)
    if scope.defining is None:
        raise SqlUnsupported(
            f"{shown} in MEASURES: physical offsets are read in DEFINE only; in MEASURES use "
            "FIRST/LAST(X.col, n)"
        )
    args = n.expressions
    if not args or len(args) > 2:
        raise SqlUnsupported(f"{shown}: write PREV(col) or PREV(col, n)")
    offset = _offset(args[1] if len(args) > 1 else None, n, 1)
    var = _one_variable(args[0], n)
    if var not in ("", scope.defining):
        raise SqlUnsupported(
            f"{shown} in DEFINE {scope.defining}: PREV reads back from the current row; name "
            f"its columns as {scope.defining}.col or col (for another variable's rows use "
            f"LAST({var}.col, n))"
        )
    if offset > scope.rows_before:
        raise SqlUnsupported(
            f"{shown} in DEFINE {scope.defining}: the PATTERN guarantees only "
            f"{scope.rows_before} row(s) of the match before a {scope.defining} row, and rows "
            "before the match are not kept (Flink refuses physical offsets altogether); use a "
            "smaller offset or LAST(X.col, n)"
        )
    body = Compiler(lambda c: c.name).compile(_unqualified(args[0]))
    order = scope.order

    def get(m: Match) -> Any:
        found = rows(m, "", order)
        return body(found[-1 - offset]) if offset < len(found) else None

    return get


def _aggregate(n: exp.Expr, fold: Callable[[list[Any]], Any], scope: Scope) -> Getter:
    arg = n.this
    order = scope.order
    if isinstance(arg, exp.Star) and isinstance(n, exp.Count):
        return lambda m: len(rows(m, "", order))
    if isinstance(arg, exp.Column):  # X.col: X's rows; col: every row of the match
        var, col = arg.table, arg.name

        def get(m: Match) -> Any:
            return fold([r.get(col) for r in rows(m, var, order) if r.get(col) is not None])

        return get
    raise SqlUnsupported(
        f"{n.sql(WeirFlink)}: aggregate a column, e.g. SUM(A.price) (A's rows), SUM(price) "
        "(every row of the match) or COUNT(*)"
    )


def _offset(node: exp.Expr | None, call: exp.Expr, default: int) -> int:
    if node is None:
        return default
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        return int(str(node.this))
    raise SqlUnsupported(f"{call.sql(WeirFlink)}: the offset must be a whole number literal")


def _one_variable(node: exp.Expr, call: exp.Expr) -> str:
    """The one variable ``node``'s columns name (``""``: none, the whole match)."""
    tables = {c.table for c in node.find_all(exp.Column)}
    if len(tables) > 1:
        raise SqlUnsupported(
            f"{call.sql(WeirFlink)}: navigate over one variable's columns at a time"
        )
    return tables.pop() if tables else ""


def _unqualified(node: exp.Expr) -> exp.Expr:
    return node.transform(lambda c: exp.column(c.name) if isinstance(c, exp.Column) else c)
