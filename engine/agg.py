"""Aggregates for ``WindowedStream.aggregate(name, **aggregates)``.

Built-ins (``count``, ``sum``, ``min``, ``max``, ``mean``) read one field of the record, or one
expression of it (``agg.sum(weir.col("value") * 2)``), and keep a flat accumulator of numbers,
so the window operator can fold a whole batch in one generated loop. ``count()`` counts
records; ``count(expr)`` counts the records whose ``expr`` is not NULL (SQL's ``COUNT(x)``).
The other built-ins take numbers only: a record whose field or expression is NULL, missing or
not a number goes to the dead letters (SQL's ``SUM`` would skip a NULL; weir loses no record
silently: ``fill_null(0)`` or a filter says what to do with them).
A user-defined aggregate is any object with ``create() -> acc``, ``add(acc, record) -> acc``,
``merge(a, b) -> acc`` and ``result(acc) -> value`` (Flink's AggregateFunction); its accumulator
must be made of msgpack types (None, bool, int, float, str, bytes, lists, dicts), because it is
stored in RocksDB without pickle.
"""

from __future__ import annotations

import builtins
import zlib
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from weir.engine.expressions import Expr
from weir.engine.kernels import ir

BuiltinKind = Literal["count", "sum", "min", "max", "mean"]


@runtime_checkable
class AggregateFunction(Protocol):
    """A user-defined aggregate (create / add / merge / result)."""

    def create(self) -> Any: ...

    def add(self, acc: Any, record: Any) -> Any: ...

    def merge(self, a: Any, b: Any) -> Any: ...

    def result(self, acc: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Builtin:
    """A built-in aggregate over one numeric field or expression (``count()`` reads none).

    ``field`` names a plain field (``agg.sum("v")`` and ``agg.sum(col("v"))`` alike); ``expr``
    is the IR of any other input (``agg.sum(col("v") * 2)``, ``agg.count(col("v"))``)."""

    kind: BuiltinKind
    field: str | None = None
    expr: ir.Expr | None = None

    def __post_init__(self) -> None:
        if self.field is not None and self.expr is not None:
            raise ValueError(f"agg.{self.kind}: give a field or an expression, not both")
        if self.kind != "count" and not self.field and self.expr is None:
            raise ValueError(f"agg.{self.kind}() needs a field name, e.g. agg.{self.kind}('value')")

    @property
    def counts_values(self) -> bool:
        """``count(expr)``: it adds 1 for each record whose input is not NULL."""
        return self.kind == "count" and self.expr is not None

    @property
    def input(self) -> str | None:
        """The column the fold reads: the field, a name for the expression's values (its
        not-NULL flags, for ``count(expr)``), or None (``count()``). Equal expressions share
        a name, as equal fields do."""
        if self.expr is None:
            return self.field
        digest = zlib.crc32(repr(self.expr).encode())
        return f"__{'nonnull' if self.counts_values else 'expr'}_{digest:08x}"

    @property
    def slots(self) -> int:
        return 2 if self.kind == "mean" else 1

    def init_exprs(self, v: str) -> list[str]:
        """Accumulator slots for a first record whose field value is ``v``."""
        return {
            "count": [v if self.counts_values else "1"],
            "sum": [v],
            "min": [v],
            "max": [v],
            "mean": [v, "1"],
        }[self.kind]

    def update_stmts(self, a: str, i: int, v: str) -> list[str]:
        """Statements that fold field value ``v`` into slots ``a[i:]``."""
        if self.kind == "count":
            return [f"{a}[{i}] += {v if self.counts_values else 1}"]
        if self.kind == "sum":
            return [f"{a}[{i}] += {v}"]
        if self.kind == "min":
            return [f"if {v} < {a}[{i}]: {a}[{i}] = {v}"]
        if self.kind == "max":
            return [f"if {v} > {a}[{i}]: {a}[{i}] = {v}"]
        return [f"{a}[{i}] += {v}", f"{a}[{i + 1}] += 1"]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        if self.kind in ("count", "sum"):
            return [a[0] + b[0]]
        if self.kind == "min":
            return [builtins.min(a[0], b[0])]
        if self.kind == "max":
            return [builtins.max(a[0], b[0])]
        return [a[0] + b[0], a[1] + b[1]]

    def result(self, slots: list[Any]) -> Any:
        if self.kind == "mean":
            return slots[0] / slots[1]
        return slots[0]


@dataclass(frozen=True, slots=True)
class UserDefined:
    """Wraps a user's AggregateFunction; its accumulator takes one slot."""

    function: AggregateFunction

    slots = 1

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return [self.function.merge(a[0], b[0])]

    def result(self, slots: list[Any]) -> Any:
        return self.function.result(slots[0])


Aggregate = Builtin | UserDefined


def count(expr: str | Expr | None = None) -> Builtin:
    """Number of records in the window; with ``expr`` (an expression or a field name), the
    number whose ``expr`` is not NULL (SQL's ``COUNT(x)``).

    Example:
        >>> from weir import agg, col
        >>> agg.count().counts_values, agg.count(col("user")).counts_values
        (False, True)
    """
    if expr is None:
        return Builtin("count")
    return Builtin("count", None, _input("count", expr).ir)


def sum(field: str | Expr) -> Builtin:  # noqa: A001 - the public name mirrors SQL
    """Sum of a numeric field or expression (ints stay ints).

    Example:
        >>> from weir import agg, col
        >>> agg.sum(col("price") * col("qty")).expr is not None
        True
    """
    return _builtin("sum", field)


def min(field: str | Expr) -> Builtin:  # noqa: A001
    """Smallest value of a numeric field or expression."""
    return _builtin("min", field)


def max(field: str | Expr) -> Builtin:  # noqa: A001
    """Largest value of a numeric field or expression."""
    return _builtin("max", field)


def mean(field: str | Expr) -> Builtin:
    """Arithmetic mean of a numeric field or expression (a float)."""
    return _builtin("mean", field)


def _input(kind: str, value: object) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, str) and value:
        return Expr(ir.Col(value))
    raise TypeError(
        f"agg.{kind}({value!r}): pass a field name or an expression, e.g. "
        f"agg.{kind}('value') or agg.{kind}(col('value') * 2)"
    )


def _builtin(kind: BuiltinKind, value: object) -> Builtin:
    node = _input(kind, value).ir
    if isinstance(node, ir.Col):  # a plain field: the field form, which every path reads
        return Builtin(kind, node.name)
    return Builtin(kind, None, node)


def custom(function: AggregateFunction) -> UserDefined:
    """A user-defined aggregate with create / add / merge / result."""
    missing = [
        m for m in ("create", "add", "merge", "result") if not callable(getattr(function, m, None))
    ]
    if missing:
        raise TypeError(
            f"aggregate {function!r} lacks {', '.join(missing)}; a user-defined aggregate needs "
            "create(), add(acc, record), merge(a, b) and result(acc)"
        )
    return UserDefined(function)


def as_aggregate(value: object, name: str) -> Aggregate:
    """Accept a built-in, a wrapped or a bare user-defined aggregate."""
    if isinstance(value, Builtin | UserDefined):
        return value
    if isinstance(value, AggregateFunction):
        return custom(value)
    raise TypeError(
        f"aggregate {name}={value!r} is not an aggregate; use agg.count(), agg.sum('field'), "
        "... or an object with create/add/merge/result"
    )
