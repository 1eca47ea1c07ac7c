"""Aggregates the SQL front end adds to ``agg``'s: ``COUNT(DISTINCT x)``, user-defined
aggregates called with an argument, and a cast of either's result. They follow the create /
add / merge / result protocol and keep msgpack-only accumulators, as every weir aggregate must
(they are stored in RocksDB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.agg import AggregateFunction, CastTo, cast_value

Fn = Callable[[Any], Any]


def _distinct_token(v: Any) -> str:
    """One string per distinct SQL value: 1 and 1.0 are one value, 1 and '1' are two."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{type(v).__name__}:{v}"


class CountDistinct:
    """``COUNT(DISTINCT x)``: the number of distinct non-NULL values of ``x`` in the window.
    The accumulator maps each value's token to 1 (a msgpack map), so merging is a union."""

    def __init__(self, argument: Fn, sql: str) -> None:
        self._argument = argument
        self.sql = sql

    def create(self) -> dict[str, int]:
        return {}

    def add(self, acc: dict[str, int], record: Any) -> dict[str, int]:
        v = self._argument(record)
        if v is not None:
            acc[_distinct_token(v)] = 1
        return acc

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {**a, **b}

    def result(self, acc: dict[str, int]) -> int:
        return len(acc)


class Called:
    """A user-defined aggregate called from SQL with arguments: its ``add`` gets the argument's
    value (a tuple of them for several), as Flink hands an AggregateFunction its arguments;
    called with ``*`` or nothing, it gets the whole record, as in the Python API."""

    def __init__(self, function: AggregateFunction, argument: Fn | None, sql: str) -> None:
        self.function = function
        self._argument = argument
        self.sql = sql

    def create(self) -> Any:
        return self.function.create()

    def add(self, acc: Any, record: Any) -> Any:
        value = record if self._argument is None else self._argument(record)
        return self.function.add(acc, value)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function.merge(a, b)

    def result(self, acc: Any) -> Any:
        return self.function.result(acc)


class Cast:
    """``CAST(<aggregate> AS <type>)`` over an aggregate that is not a built-in (a built-in
    takes ``agg.cast``): the aggregate itself, its result converted, NULL staying NULL."""

    def __init__(self, function: AggregateFunction, to: CastTo, sql: str) -> None:
        self.function = function
        self.to = to
        self.sql = sql

    def create(self) -> Any:
        return self.function.create()

    def add(self, acc: Any, record: Any) -> Any:
        return self.function.add(acc, record)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function.merge(a, b)

    def result(self, acc: Any) -> Any:
        return cast_value(self.to, self.function.result(acc))
