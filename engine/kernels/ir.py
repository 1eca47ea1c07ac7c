"""The expression IR: what the public expression API (``weir.col("event") == "impression"``) and
Stream SQL's WHERE, projections, keys and aggregate inputs will compile to, and what the columnar
evaluator (``expr``) runs over scanned columns.

Nodes are frozen dataclasses, so an expression is a value (hashable, comparable, printable):

- ``Col(name)``: a field of the record; ``Lit(value)``: ``None``, ``bool``, ``int`` (int64),
  ``float`` or ``str``;
- ``Cmp(op, left, right)``, ``op`` in ``eq ne lt le gt ge``;
- ``Arith(op, left, right)``, ``op`` in ``add sub mul div mod``; ``Neg(x)``;
- ``And(left, right)``, ``Or(left, right)``, ``Not(x)``;
- ``IsIn(x, values)``, ``IsNull(x)``, ``StartsWith(x, prefix)``, ``Contains(x, part)``;
- ``Cast(x, to)``, ``to`` in ``int float str``.

Semantics (``evaluate_row`` is their reference, one record at a time):

- a missing field and JSON ``null`` are NULL; NULL goes through comparisons, arithmetic, string
  predicates and casts; ``And``/``Or``/``Not`` are Kleene's three-valued logic (SQL's);
  ``IsNull`` is never NULL; a filter keeps the rows whose predicate is TRUE;
- ints and floats compare exactly with each other (as Python does); values of other different
  types are never ``eq`` (and always ``ne``); ordering them is an error;
- ``int`` arithmetic is int64: a result outside it is an error (never wrapped); ``div`` is
  true division (a float); ``mod`` is the floor remainder; a zero divisor is an error; with a
  float on either side the operation is in double precision;
- bools are not numbers: arithmetic or ordering on them is an error;
- a string predicate on a non-string, or a cast it cannot make, is an error.

An error is ``ExprError`` per row: the record goes to the dead letters with the reason
``expression: <what>`` and the job goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scalar = None | bool | int | float | str
CmpOp = Literal["eq", "ne", "lt", "le", "gt", "ge"]
ArithOp = Literal["add", "sub", "mul", "div", "mod"]
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
class Contains:
    x: Expr
    part: str


@dataclass(frozen=True, slots=True)
class Cast:
    x: Expr
    to: Literal["int", "float", "str"]


Expr = Col | Lit | Cmp | Arith | Neg | And | Or | Not | IsIn | IsNull | StartsWith | Contains | Cast
NODES = (Col, Lit, Cmp, Arith, Neg, And, Or, Not, IsIn, IsNull, StartsWith, Contains, Cast)


def columns_of(expr: Expr) -> list[str]:
    """The fields ``expr`` reads, in first-use order (what the scanner must extract)."""
    out: list[str] = []

    def walk(e: Expr) -> None:
        if isinstance(e, Col):
            if e.name not in out:
                out.append(e.name)
            return
        for name in e.__slots__:
            child = getattr(e, name)
            if isinstance(child, NODES):
                walk(child)

    walk(expr)
    return out


def _is_num(v: object) -> bool:
    return type(v) is int or type(v) is float


def _kind(v: object) -> str:
    return type(v).__name__


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


def arith(op: str, a: Scalar, b: Scalar) -> Scalar:
    """``Arith`` on two values (the reference)."""
    if a is None or b is None:
        return None
    if not (_is_num(a) and _is_num(b)):
        raise ExprError(f"cannot {op} {_kind(a)} {a!r} and {_kind(b)} {b!r}")
    x: float | int = a  # type: ignore[assignment]
    y: float | int = b  # type: ignore[assignment]
    if op in ("div", "mod") and y == 0:
        raise ExprError(f"{op} of {x!r} by zero")
    if op == "div":
        return float(x) / float(y)
    if op == "add":
        r = x + y
    elif op == "sub":
        r = x - y
    elif op == "mul":
        r = x * y
    else:
        r = x % y
    if type(r) is int and not I64_MIN <= r <= I64_MAX:
        raise ExprError(f"{op} of {x} and {y} overflows int64")
    return r


def negate(v: Scalar) -> Scalar:
    """``Neg`` of one value (the reference): Python's unary minus, int64-checked."""
    if v is None:
        return None
    if not _is_num(v):
        raise ExprError(f"cannot negate {_kind(v)} {v!r}")
    r = -v  # type: ignore[operator]
    if type(r) is int and not I64_MIN <= r <= I64_MAX:
        raise ExprError(f"negating {v} overflows int64")
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


def _logic(e: And | Or, a: bool | None, b: bool | None) -> bool | None:
    if isinstance(e, And):
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _truth(v: Scalar) -> bool | None:
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
        v = rec.get(e.name)
        if type(v) is int and not I64_MIN <= v <= I64_MAX:
            raise ExprError(f"field {e.name!r} holds {v}, outside int64")
        if v is None or type(v) in (bool, int, float, str):
            return v  # type: ignore[return-value]
        raise ExprError(f"field {e.name!r} holds {_kind(v)}, not a scalar")
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Cmp):
        return compare(e.op, evaluate_row(e.left, rec), evaluate_row(e.right, rec))
    if isinstance(e, Arith):
        return arith(e.op, evaluate_row(e.left, rec), evaluate_row(e.right, rec))
    if isinstance(e, Neg):
        return negate(evaluate_row(e.x, rec))
    if isinstance(e, And | Or):
        return _logic(e, _truth(evaluate_row(e.left, rec)), _truth(evaluate_row(e.right, rec)))
    if isinstance(e, Not):
        t = _truth(evaluate_row(e.x, rec))
        return None if t is None else not t
    if isinstance(e, IsNull):
        return evaluate_row(e.x, rec) is None
    if isinstance(e, IsIn):
        v = evaluate_row(e.x, rec)
        return None if v is None else any(compare("eq", v, w) for w in e.values)
    if isinstance(e, StartsWith | Contains):
        v = evaluate_row(e.x, rec)
        if v is None:
            return None
        if type(v) is not str:
            raise ExprError(f"{type(e).__name__} on {_kind(v)} {v!r}, not a string")
        return v.startswith(e.prefix) if isinstance(e, StartsWith) else e.part in v
    return cast(evaluate_row(e.x, rec), e.to)
