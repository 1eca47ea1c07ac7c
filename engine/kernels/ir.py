"""The expression IR: what the public expression API (``weir.col("event") == "impression"``) and
Stream SQL's WHERE, projections, keys and aggregate inputs will compile to, and what the columnar
evaluator (``expr``) runs over scanned columns.

Nodes are frozen dataclasses, so an expression is a value (hashable, comparable, printable):

- ``Col(name)``: a field of the record; ``Lit(value)``: ``None``, ``bool``, ``int`` (int64),
  ``float`` or ``str``;
- ``Cmp(op, left, right)``, ``op`` in ``eq ne lt le gt ge``;
- ``Arith(op, left, right)``, ``op`` in ``add sub mul div floordiv mod``; ``Neg(x)``;
- ``And(left, right)``, ``Or(left, right)``, ``Not(x)``;
- ``IsIn(x, values)``, ``IsNull(x)``, ``StartsWith(x, prefix)``, ``EndsWith(x, suffix)``,
  ``Contains(x, part)``;
- ``Cast(x, to)``, ``to`` in ``int float str``;
- ``Coalesce(xs)``: the first of ``xs`` that is not NULL; ``Case(whens, otherwise)``: the value
  of the first ``(condition, value)`` pair whose condition is TRUE, else ``otherwise``.

Semantics (``evaluate_row`` is their reference, one record at a time):

- a missing field and JSON ``null`` are NULL; NULL goes through comparisons, arithmetic, string
  predicates and casts; ``And``/``Or``/``Not`` are Kleene's three-valued logic (SQL's);
  ``IsNull`` is never NULL; a filter keeps the rows whose predicate is TRUE;
- ints and floats compare exactly with each other (as Python does); values of other different
  types are never ``eq`` (and always ``ne``); ordering them is an error;
- ``int`` arithmetic is int64: a result outside it is an error (never wrapped); ``div`` is
  true division (a float); ``floordiv`` and ``mod`` are Python's floor quotient and remainder
  (``mod`` takes the divisor's sign); a zero divisor is an error; with a float on either side
  the operation is in double precision;
- bools are not numbers: arithmetic or ordering on them is an error;
- a string predicate on a non-string, or a cast it cannot make, is an error;
- every node evaluates all its operands, left to right (``And``/``Or`` too: an error on
  either side is the row's error), except ``Coalesce`` and ``Case``, which evaluate an operand
  only when they need it (the conditions in order, then the chosen value), so
  ``Case(((n != 0, v / n),), NULL)`` never divides by zero.

An error is ``ExprError`` per row: the record goes to the dead letters with the reason
``expression: <what>`` and the job goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scalar = None | bool | int | float | str
CmpOp = Literal["eq", "ne", "lt", "le", "gt", "ge"]
ArithOp = Literal["add", "sub", "mul", "div", "floordiv", "mod"]
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class ExprError(ValueError):
    """One row's expression cannot be evaluated (the message is the dead-letter reason)."""


@dataclass(frozen=True, slots=True)
class Col:
    name: str


@dataclass(frozen=True, slots=True)
class Lit:
    value: Scalar


@dataclass(frozen=True, slots=True)
class Cmp:
    op: CmpOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Arith:
    op: ArithOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Neg:
    x: Expr


@dataclass(frozen=True, slots=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Or:
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Not:
    x: Expr


@dataclass(frozen=True, slots=True)
class IsIn:
    x: Expr
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class IsNull:
    x: Expr


@dataclass(frozen=True, slots=True)
class StartsWith:
    x: Expr
    prefix: str


@dataclass(frozen=True, slots=True)
class EndsWith:
    x: Expr
    suffix: str


@dataclass(frozen=True, slots=True)
class Contains:
    x: Expr
    part: str


@dataclass(frozen=True, slots=True)
class Cast:
    x: Expr
    to: Literal["int", "float", "str"]


@dataclass(frozen=True, slots=True)
class Coalesce:
    xs: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Case:
    whens: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr


Expr = (
    Col | Lit | Cmp | Arith | Neg | And | Or | Not | IsIn | IsNull | StartsWith | EndsWith
    | Contains | Cast | Coalesce | Case
)  # fmt: skip
NODES = (
    Col, Lit, Cmp, Arith, Neg, And, Or, Not, IsIn, IsNull, StartsWith, EndsWith, Contains, Cast,
    Coalesce, Case,
)  # fmt: skip


def children(e: Expr) -> list[Expr]:
    """``e``'s operands, in the order ``evaluate_row`` evaluates them (conditions before
    values)."""
    if isinstance(e, Coalesce):
        return list(e.xs)
    if isinstance(e, Case):
        return [x for pair in e.whens for x in pair] + [e.otherwise]
    return [c for c in (getattr(e, n) for n in e.__slots__) if isinstance(c, NODES)]


def columns_of(expr: Expr) -> list[str]:
    """The fields ``expr`` reads, in first-use order (what the scanner must extract)."""
    out: list[str] = []

    def walk(e: Expr) -> None:
        if isinstance(e, Col):
            if e.name not in out:
                out.append(e.name)
            return
        for child in children(e):
            walk(child)

    walk(expr)
    return out


def _is_num(v: object) -> bool:
    return type(v) is int or type(v) is float


def _kind(v: object) -> str:
    return type(v).__name__


def field_value(name: str, v: object) -> Scalar:
    """``Col(name)`` of a record holding ``v`` there (the reference): a scalar, or an error."""
    t = type(v)
    if t is str or t is float or t is bool or v is None:
        return v  # type: ignore[return-value]
    if t is int:
        if I64_MIN <= v <= I64_MAX:  # type: ignore[operator]
            return v  # type: ignore[return-value]
        raise ExprError(f"field {name!r} holds {v}, outside int64")
    raise ExprError(f"field {name!r} holds {_kind(v)}, not a scalar")


def compare(op: str, a: Scalar, b: Scalar) -> bool | None:
    """``Cmp`` on two values (the reference)."""
    if a is None or b is None:
        return None
    same = type(a) is type(b) or (_is_num(a) and _is_num(b))
    if op in ("eq", "ne"):
        eq = same and a == b
        return eq if op == "eq" else not eq
    if not same or type(a) is bool:
        raise ExprError(f"cannot order {_kind(a)} {a!r} and {_kind(b)} {b!r}")
    if op == "lt":
        return a < b  # type: ignore[operator]
    if op == "le":
        return a <= b  # type: ignore[operator]
    if op == "gt":
        return a > b  # type: ignore[operator]
    return a >= b  # type: ignore[operator]


SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%"}


def arith(op: str, a: Scalar, b: Scalar) -> Scalar:
    """``Arith`` on two values (the reference)."""
    if a is None or b is None:
        return None
    symbol = SYMBOLS[op]
    if not (_is_num(a) and _is_num(b)):
        raise ExprError(
            f"cannot compute {_kind(a)} {a!r} {symbol} {_kind(b)} {b!r}: arithmetic takes numbers"
        )
    x: float | int = a  # type: ignore[assignment]
    y: float | int = b  # type: ignore[assignment]
    if op in ("div", "floordiv", "mod") and y == 0:
        raise ExprError(f"{x!r} {symbol} {y!r}: {'modulo' if op == 'mod' else 'division'} by zero")
    if op == "div":
        return float(x) / float(y)
    if op == "add":
        r = x + y
    elif op == "sub":
        r = x - y
    elif op == "mul":
        r = x * y
    elif op == "floordiv":
        r = x // y
    else:
        r = x % y
    if type(r) is int and not I64_MIN <= r <= I64_MAX:
        raise ExprError(f"{x} {symbol} {y} overflows int64")
    return r


def negate(v: Scalar) -> Scalar:
    """``Neg`` of one value (the reference): Python's unary minus, int64-checked."""
    if v is None:
        return None
    if not _is_num(v):
        raise ExprError(f"cannot negate {_kind(v)} {v!r}")
    r = -v  # type: ignore[operator]
    if type(r) is int and not I64_MIN <= r <= I64_MAX:
        raise ExprError(f"-({v}) overflows int64")
    return r


def cast(v: Scalar, to: str) -> Scalar:
    """``Cast`` of one value (the reference)."""
    if v is None:
        return None
    try:
        if to == "str":
            if type(v) is bool or type(v) is float:
                raise ValueError("only ints and strings cast to str")
            return str(v)
        if type(v) is bool:
            raise ValueError("bools do not cast to numbers")
        if to == "float":
            return float(v)
        r = int(v)
        if not I64_MIN <= r <= I64_MAX:
            raise ValueError("outside int64")
        return r
    except (ValueError, OverflowError) as exc:
        raise ExprError(f"cannot cast {_kind(v)} {v!r} to {to}: {exc}") from None


def string_test(e: StartsWith | EndsWith | Contains, v: Scalar) -> bool | None:
    """A string predicate on one value (the reference)."""
    if v is None:
        return None
    if type(v) is not str:
        raise ExprError(f"{type(e).__name__} on {_kind(v)} {v!r}, not a string")
    if isinstance(e, StartsWith):
        return v.startswith(e.prefix)
    if isinstance(e, EndsWith):
        return v.endswith(e.suffix)
    return e.part in v


def logic(e: And | Or, a: bool | None, b: bool | None) -> bool | None:
    if isinstance(e, And):
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def truth(v: Scalar) -> bool | None:
    """A condition's value (the reference): TRUE, FALSE or NULL; anything else is an error."""
    if v is None or type(v) is bool:
        return v
    raise ExprError(f"{_kind(v)} {v!r} is not a boolean")


def evaluate_row(expr: Expr, rec: dict[str, object]) -> Scalar:
    """``expr`` on one decoded record: the semantics the columnar evaluator must equal.

    Raises:
        ExprError: the row's value cannot be computed (its message is the reason).
    """
    e = expr
    if isinstance(e, Col):
        return field_value(e.name, rec.get(e.name))
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Cmp):
        return compare(e.op, evaluate_row(e.left, rec), evaluate_row(e.right, rec))
    if isinstance(e, Arith):
        return arith(e.op, evaluate_row(e.left, rec), evaluate_row(e.right, rec))
    if isinstance(e, Neg):
        return negate(evaluate_row(e.x, rec))
    if isinstance(e, And | Or):
        return logic(e, truth(evaluate_row(e.left, rec)), truth(evaluate_row(e.right, rec)))
    if isinstance(e, Not):
        t = truth(evaluate_row(e.x, rec))
        return None if t is None else not t
    if isinstance(e, IsNull):
        return evaluate_row(e.x, rec) is None
    if isinstance(e, IsIn):
        v = evaluate_row(e.x, rec)
        return None if v is None else any(compare("eq", v, w) for w in e.values)
    if isinstance(e, StartsWith | EndsWith | Contains):
        return string_test(e, evaluate_row(e.x, rec))
    if isinstance(e, Coalesce):
        for x in e.xs:
            v = evaluate_row(x, rec)
            if v is not None:
                return v
        return None
    if isinstance(e, Case):
        for cond, then in e.whens:
            if truth(evaluate_row(cond, rec)) is True:
                return evaluate_row(then, rec)
        return evaluate_row(e.otherwise, rec)
    return cast(evaluate_row(e.x, rec), e.to)
