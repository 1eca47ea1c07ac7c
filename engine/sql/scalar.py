"""SQL scalar expressions compiled once, at job definition, into Python closures over a record.

Each node of the parse tree becomes one closure that calls its children's closures, so a record
is never matched against the tree. SQL's NULL is ``None``: a column the record lacks reads as
NULL, arithmetic and comparisons with NULL give NULL, ``AND``/``OR``/``NOT`` follow SQL's
three-valued logic, and ``WHERE`` keeps a record only when its condition is TRUE. A value of the
wrong type (``'a' < 1``, a division by zero) raises, which sends the record to the dead letters,
as a failing ``filter`` or ``map`` does in the Python API.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlUnsupported
from weir.engine.sql.functions import FUNCTION_HANDLERS, as_text

Fn = Callable[[Any], Any]
ColumnResolver = Callable[[exp.Column], str]  # a column node -> the record field it reads

SCALAR_FUNCTIONS = (
    "ABS, CAST, CEIL, CHAR_LENGTH, COALESCE, CONCAT (and ||), FLOOR, LOWER, MOD, SUBSTRING, "
    "TRIM, UPPER"
)


class Compiler:
    """Compiles expression nodes; ``column`` resolves a column to its field (and refuses an
    unknown one, naming the candidates)."""

    def __init__(self, column: ColumnResolver) -> None:
        self._column = column

    def compile(self, node: exp.Expr) -> Fn:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise _unsupported(node)
        return handler(self, node)

    def predicate(self, node: exp.Expr) -> Fn:
        """A WHERE condition: TRUE keeps the record; FALSE and NULL drop it."""
        f = self.compile(node)
        return lambda r: f(r) is True

    def _args(self, node: exp.Expr, *names: str) -> list[Fn]:
        return [self.compile(node.args[n]) for n in names]


def _unsupported(node: exp.Expr) -> SqlUnsupported:
    if isinstance(node, exp.AggFunc):
        return SqlUnsupported(
            f"aggregate {node.sql(WeirFlink)} is not allowed here; aggregates go in "
            "the SELECT list of "
            "a windowed GROUP BY query"
        )
    if isinstance(node, exp.Func):
        name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)
        return SqlUnsupported(
            f"function {name} ({node.sql(WeirFlink)}) is not a scalar function weir "
            "knows; it knows "
            f"{SCALAR_FUNCTIONS}, CASE, IS NULL, LIKE, IN, BETWEEN and arithmetic"
        )
    return SqlUnsupported(f"SQL expression {node.sql(WeirFlink)} is not supported by weir's SQL")


# -- leaves ------------------------------------------------------------------------------------


def _column(c: Compiler, node: exp.Column) -> Fn:
    name = c._column(node)
    return lambda r: r.get(name)


def _literal(c: Compiler, node: exp.Literal) -> Fn:
    value = literal_value(node)
    return lambda r: value


def literal_value(node: exp.Literal) -> Any:
    if node.is_string:
        return str(node.this)
    text = str(node.this)
    try:
        return int(text)
    except ValueError:
        return float(text)


def _boolean(c: Compiler, node: exp.Boolean) -> Fn:
    value = bool(node.this)
    return lambda r: value


def _null(c: Compiler, node: exp.Null) -> Fn:
    return lambda r: None


def _paren(c: Compiler, node: exp.Paren) -> Fn:
    return c.compile(node.this)


# -- arithmetic and comparison: NULL in, NULL out ----------------------------------------------


def _sql_div(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:  # SQL's integer division truncates toward zero
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a / b


def _sql_mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:  # the result takes the dividend's sign, as in SQL
        return a - b * int(_sql_div(a, b))
    return math.fmod(a, b)


_BINARY: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Div: _sql_div,
    exp.Mod: _sql_mod,
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
    exp.DPipe: lambda a, b: as_text(a) + as_text(b),
}


def _binary(c: Compiler, node: exp.Binary) -> Fn:
    op = _BINARY[type(node)]
    left, right = c._args(node, "this", "expression")

    def apply(r: Any) -> Any:
        a = left(r)
        if a is None:
            return None
        b = right(r)
        return None if b is None else op(a, b)

    return apply


def _neg(c: Compiler, node: exp.Neg) -> Fn:
    f = c.compile(node.this)
    return lambda r: None if (v := f(r)) is None else -v


# -- logic: three-valued ------------------------------------------------------------------------


def _and(c: Compiler, node: exp.And) -> Fn:
    left, right = c._args(node, "this", "expression")

    def apply(r: Any) -> Any:
        a = left(r)
        if a is False:
            return False
        b = right(r)
        if b is False:
            return False
        return None if a is None or b is None else True

    return apply


def _or(c: Compiler, node: exp.Or) -> Fn:
    left, right = c._args(node, "this", "expression")

    def apply(r: Any) -> Any:
        a = left(r)
        if a is True:
            return True
        b = right(r)
        if b is True:
            return True
        return None if a is None or b is None else False

    return apply


def _not(c: Compiler, node: exp.Not) -> Fn:
    f = c.compile(node.this)
    return lambda r: None if (v := f(r)) is None else not v


def _is(c: Compiler, node: exp.Is) -> Fn:
    if not isinstance(node.expression, exp.Null):
        raise _unsupported(node)
    f = c.compile(node.this)
    return lambda r: f(r) is None


def _between(c: Compiler, node: exp.Between) -> Fn:
    f, lo, hi = c._args(node, "this", "low", "high")

    def apply(r: Any) -> Any:
        v, a, b = f(r), lo(r), hi(r)
        return None if v is None or a is None or b is None else a <= v <= b

    return apply


def _in(c: Compiler, node: exp.In) -> Fn:
    if node.args.get("query") is not None or node.args.get("unnest") is not None:
        raise SqlUnsupported(f"{node.sql(WeirFlink)}: IN takes a list of values, not a subquery")
    f = c.compile(node.this)
    items = node.expressions
    if all(isinstance(i, exp.Literal) for i in items):
        values = frozenset(literal_value(i) for i in items)
        return lambda r: None if (v := f(r)) is None else v in values
    fns = [c.compile(i) for i in items]
    return lambda r: None if (v := f(r)) is None else any(v == g(r) for g in fns)


def _like(c: Compiler, node: exp.Like) -> Fn:
    f = c.compile(node.this)
    negate = bool(node.args.get("negate"))
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise SqlUnsupported(f"{node.sql(WeirFlink)}: LIKE takes a string literal pattern")
    match = like_regex(str(pattern.this)).fullmatch

    def apply(r: Any) -> Any:
        v = f(r)
        if v is None:
            return None
        return (match(v) is None) if negate else (match(v) is not None)

    return apply


def like_regex(pattern: str) -> re.Pattern[str]:
    """SQL's LIKE pattern (``%`` any run, ``_`` one character) as a regular expression."""
    parts = [".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern]
    return re.compile("".join(parts), re.DOTALL)


def _case(c: Compiler, node: exp.Case) -> Fn:
    subject = c.compile(node.this) if node.this is not None else None
    arms = [(c.compile(i.this), c.compile(i.args["true"])) for i in node.args.get("ifs", [])]
    default_node = node.args.get("default")
    default = c.compile(default_node) if default_node is not None else (lambda r: None)

    def apply(r: Any) -> Any:
        s = subject(r) if subject is not None else None
        for cond, value in arms:
            hit = cond(r)
            if (hit is True) if subject is None else (hit is not None and hit == s):
                return value(r)
        return default(r)

    return apply


_HANDLERS: dict[type[exp.Expr], Callable[[Compiler, Any], Fn]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Boolean: _boolean,
    exp.Null: _null,
    exp.Paren: _paren,
    exp.Neg: _neg,
    exp.And: _and,
    exp.Or: _or,
    exp.Not: _not,
    exp.Is: _is,
    exp.Between: _between,
    exp.In: _in,
    exp.Like: _like,
    exp.Case: _case,
    **{t: _binary for t in _BINARY},
    **FUNCTION_HANDLERS,
}
