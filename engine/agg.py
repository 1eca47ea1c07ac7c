"""Aggregates for ``WindowedStream.aggregate(name, **aggregates)``.

Built-ins (``count``, ``sum``, ``min``, ``max``, ``mean``) read one field of the record and keep a
flat accumulator of numbers, so the window operator can fold a whole batch in one generated loop.
A user-defined aggregate is any object with ``create() -> acc``, ``add(acc, record) -> acc``,
``merge(a, b) -> acc`` and ``result(acc) -> value`` (Flink's AggregateFunction); its accumulator
must be made of msgpack types (None, bool, int, float, str, bytes, lists, dicts), because it is
stored in RocksDB without pickle.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
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
    """A built-in aggregate over one numeric field (``count`` reads none), or over an
    expression's value (``expr``; ``field`` stays for a plain column name)."""

    kind: BuiltinKind
    field: str | None = None
    expr: ir.Expr | None = None

    def __post_init__(self) -> None:
        if self.kind != "count" and not self.field and self.expr is None:
            raise ValueError(f"agg.{self.kind}() needs a field name, e.g. agg.{self.kind}('value')")

    @property
    def slots(self) -> int:
        return 2 if self.kind == "mean" else 1

    def init_exprs(self, v: str) -> list[str]:
        """Accumulator slots for a first record whose field value is ``v``."""
        return {
            "count": ["1"],
            "sum": [v],
            "min": [v],
            "max": [v],
            "mean": [v, "1"],
        }[self.kind]

    def update_stmts(self, a: str, i: int, v: str) -> list[str]:
        """Statements that fold field value ``v`` into slots ``a[i:]``."""
        if self.kind == "count":
            return [f"{a}[{i}] += 1"]
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


def count() -> Builtin:
    """Number of records in the window."""
    return Builtin("count")


def sum(field: str) -> Builtin:  # noqa: A001 - the public name mirrors SQL
    """Sum of a numeric field (ints stay ints)."""
    return Builtin("sum", field)


def min(field: str) -> Builtin:  # noqa: A001
    return Builtin("min", field)


def max(field: str) -> Builtin:  # noqa: A001
    return Builtin("max", field)


def mean(field: str) -> Builtin:
    """Arithmetic mean of a numeric field (a float)."""
    return Builtin("mean", field)


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
