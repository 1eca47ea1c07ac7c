"""SQL scalar expressions as the expression IR (``kernels.ir``), where the IR computes what
``scalar.Compiler``'s closure computes, so a SQL ``WHERE`` runs on scanned columns as
``weir.col(...)`` filters do (issue 38, item 1).

The closure stays what the per-record chain runs (its dead-letter reasons are SQL's); the IR is
what the columnar source evaluates over a clean batch, and a batch where the IR fails on a row
it reaches goes to the per-record path whole. So the IR may fail where the closure does not
(that batch is only slower), but where the IR gives a value it must be the closure's, and
where the closure raises the IR must fail. ``to_ir`` therefore translates only the forms
whose semantics agree exactly and answers, for anything else, which part kept the clause off
the columns and why:

- comparisons: ordering (``<``, ``<=``, ``>``, ``>=``) agrees (Python's and the IR's, the IR
  failing on bools and on mixed types, which Python orders or refuses); ``=`` and ``<>``
  agree when one side is a string literal; against a number literal the other side is read
  through ``x + 0`` (the IR fails on a bool or a string there, where Python calls ``TRUE = 1``
  true), against a boolean literal through ``NOT NOT x`` (the IR fails on a non-boolean);
- ``+``, ``-``, ``*`` and unary minus (the IR fails past int64, where Python's ints go on, and
  on strings and bools); ``/`` and ``%`` stay closures (SQL's integer division truncates, the
  IR's ``floordiv`` floors);
- ``AND``, ``OR``, ``NOT``: the IR evaluates both sides and fails on a non-boolean, so it fails
  wherever the short-circuiting closure does, and agrees elsewhere;
- ``IS [NOT] NULL``; ``IN`` of literals (guarded as ``=`` is); ``BETWEEN`` with literal bounds;
  ``LIKE`` / ``NOT LIKE`` of ``'prefix%'``, ``'%suffix'``, ``'%part%'`` and ``'%'`` (no ``_``,
  no escape);
- columns, string, number, boolean and NULL literals (an int literal within int64).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from weir.engine.kernels import ir
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.scalar import ColumnResolver, literal_value

Translated = ir.Expr | str  # the IR, or why the expression is not translated


class NotTranslated(Exception):
    """An expression the IR does not compute as SQL's closure does; the message says why."""


def to_ir(node: exp.Expr, column: ColumnResolver) -> Translated:
    """``node`` (a WHERE condition, a projection, a key) as IR, or the reason it stays a
    closure: ``"<the SQL part>: <why>"``.

    Args:
        node: the parsed SQL expression.
        column: resolves a column node to the record field it reads.

    Returns:
        An ``ir.Expr`` whose value equals the closure's wherever it has one, or a string.

    Example:
        >>> to_ir(sqlglot.parse_one("event = 'impression'"), lambda c: c.name)
        Cmp(op='eq', left=Col(name='event'), right=Lit(value='impression'))
    """
    try:
        return _Translator(column).go(node)
    except NotTranslated as exc:
        return str(exc)


def _no(node: exp.Expr, why: str) -> NotTranslated:
    return NotTranslated(f"{node.sql(WeirFlink)}: {why}")


_ORDER: dict[type[exp.Expr], ir.CmpOp] = {
    exp.GT: "gt",
    exp.GTE: "ge",
    exp.LT: "lt",
    exp.LTE: "le",
}
_EQUALITY: dict[type[exp.Expr], ir.CmpOp] = {exp.EQ: "eq", exp.NEQ: "ne"}
_EQUALITY_WHY = (
    "= and <> compare with a literal on the columns (Python's equality of booleans and "
    "numbers, TRUE = 1, differs from the IR's)"
)
_ARITH: dict[type[exp.Expr], ir.ArithOp] = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul"}


class _Translator:
    def __init__(self, column: ColumnResolver) -> None:
        self._column = column
        self._handlers: dict[type[exp.Expr], Callable[[exp.Expr], ir.Expr]] = {
            exp.Column: self._col,
            exp.Literal: self._literal,
            exp.Boolean: lambda n: ir.Lit(bool(n.this)),
            exp.Null: lambda n: ir.Lit(None),
            exp.Paren: lambda n: self.go(n.this),
            exp.Neg: lambda n: ir.Neg(self.go(n.this)),
            exp.And: lambda n: ir.And(self.go(n.this), self.go(n.expression)),
            exp.Or: lambda n: ir.Or(self.go(n.this), self.go(n.expression)),
            exp.Not: lambda n: ir.Not(self.go(n.this)),
            exp.Is: self._is,
            exp.In: self._in,
            exp.Between: self._between,
            exp.Like: self._like,
        }

    def go(self, node: exp.Expr) -> ir.Expr:
        t = type(node)
        if t in _ORDER:
            return ir.Cmp(_ORDER[t], self.go(node.this), self.go(node.expression))
        if t in _EQUALITY:
            return self._equality(node, _EQUALITY[t])
        if t in _ARITH:
            return ir.Arith(_ARITH[t], self.go(node.this), self.go(node.expression))
        handler = self._handlers.get(t)
        if handler is None:
            raise _no(node, _why_not(node))
        return handler(node)

    def _col(self, node: exp.Expr) -> ir.Expr:
        assert isinstance(node, exp.Column)
        return ir.Col(self._column(node))

    def _literal(self, node: exp.Expr) -> ir.Expr:
        assert isinstance(node, exp.Literal)
        value = literal_value(node)
        if type(value) is int and not ir.I64_MIN <= value <= ir.I64_MAX:
            raise _no(node, "an integer literal outside int64")
        return ir.Lit(value)

    def _equality(self, node: exp.Expr, op: ir.CmpOp) -> ir.Expr:
        left, right = node.this, node.expression
        if _literal_of(right) is None and _literal_of(left) is not None:
            left, right = right, left
        kind = _literal_of(right)
        if kind is None:
            raise _no(node, _EQUALITY_WHY)
        return ir.Cmp(op, _guarded(self.go(left), kind), self.go(right))

    def _is(self, node: exp.Expr) -> ir.Expr:
        if not isinstance(node.expression, exp.Null):
            raise _no(node, "IS takes NULL here")
        return ir.IsNull(self.go(node.this))

    def _in(self, node: exp.Expr) -> ir.Expr:
        items = node.expressions
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise _no(node, "IN takes a list of values")
        if not items or not all(isinstance(i, exp.Literal) for i in items):
            raise _no(node, "IN of anything but literals")
        values = tuple(self._literal(i) for i in items)
        kinds = {_literal_of(i) for i in items}
        x = self.go(node.this)
        if "number" in kinds:  # Python's `in` takes TRUE for 1; the IR fails on it instead
            x = _guarded(x, "number")
        return ir.IsIn(x, tuple(v.value for v in values if isinstance(v, ir.Lit)))

    def _between(self, node: exp.Expr) -> ir.Expr:
        low, high = node.args.get("low"), node.args.get("high")
        if node.args.get("symmetric") or not all(isinstance(b, exp.Literal) for b in (low, high)):
            raise _no(node, "BETWEEN takes literal bounds on the columns")
        assert low is not None and high is not None
        x = self.go(node.this)
        return ir.And(ir.Cmp("le", self.go(low), x), ir.Cmp("le", x, self.go(high)))

    def _like(self, node: exp.Expr) -> ir.Expr:
        pattern = node.expression
        if node.args.get("escape") is not None or not (
            isinstance(pattern, exp.Literal) and pattern.is_string
        ):
            raise _no(node, "LIKE with an escape or a pattern that is not a string literal")
        test = _like_test(str(pattern.this), self.go(node.this))
        if test is None:
            raise _no(node, "a LIKE pattern other than 'prefix%', '%suffix', '%part%'")
        return ir.Not(test) if node.args.get("negate") else test


def _literal_of(node: exp.Expr) -> str | None:
    """The kind of literal ``node`` is (``str``, ``number``, ``bool``; NULL counts as ``str``:
    both sides' equality with NULL is NULL), else None."""
    if isinstance(node, exp.Paren):
        return _literal_of(node.this)
    if isinstance(node, exp.Literal):
        return "str" if node.is_string else "number"
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Null):
        return "str"
    return None


def _guarded(x: ir.Expr, kind: str) -> ir.Expr:
    """``x`` read so that the IR fails where Python's equality with a ``kind`` literal would
    mix booleans and numbers (``TRUE = 1``): a number through ``x + 0``, a boolean through
    ``NOT NOT x``."""
    if kind == "number":
        return ir.Arith("add", x, ir.Lit(0))
    if kind == "bool":
        return ir.Not(ir.Not(x))
    return x


def _like_test(pattern: str, x: ir.Expr) -> ir.Expr | None:
    if "_" in pattern:
        return None
    inner = pattern.strip("%")
    if "%" in inner:
        return None
    if not inner:
        return ir.StartsWith(x, "") if pattern else None  # '%': any string
    if pattern == f"{inner}%":
        return ir.StartsWith(x, inner)
    if pattern == f"%{inner}":
        return ir.EndsWith(x, inner)
    if pattern == f"%{inner}%":
        return ir.Contains(x, inner)
    return None


def _why_not(node: exp.Expr) -> str:
    if isinstance(node, exp.Div | exp.Mod):
        return "SQL's integer / and % truncate toward zero, the IR's floor"
    if isinstance(node, exp.Func):
        return "functions run per record"
    return f"{type(node).__name__} runs per record"


__all__ = ["NotTranslated", "Translated", "to_ir"]
