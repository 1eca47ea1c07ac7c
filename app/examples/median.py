"""A user-defined aggregate for the SQL example (``CREATE FUNCTION median AS
'weir.app.examples.median.Median'``): called as ``median(value)``, ``add`` gets the value."""

from __future__ import annotations

from typing import Any


class Median:
    """The median of a window's non-NULL values; the accumulator is their list (msgpack)."""

    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc.append(value)
        return acc

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return a + b

    def result(self, acc: list[Any]) -> float | None:
        if not acc:
            return None
        values = sorted(acc)
        mid = len(values) // 2
        return float(values[mid]) if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
