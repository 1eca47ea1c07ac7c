"""Evictors: which of a window's records the window function sees, removed before or after it
runs (Flink's ``CountEvictor`` / ``TimeEvictor``). A window with an evictor keeps its records
(with their timestamps), not an accumulator, as Flink's ``EvictingWindowOperator`` does.

- ``count(n)``: keep the last ``n`` records (in arrival order).
- ``time(ms)``: keep the records within ``ms`` of the newest one (``t > max t - ms``).

``do_evict_after=True`` evicts after the function ran instead of before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Element = list[Any]  # [timestamp, record]


@dataclass(frozen=True, slots=True)
class CountEvictor:
    """Keeps a window's last ``n`` records (``evictors.count``)."""

    n: int
    do_evict_after: bool = False

    def __post_init__(self) -> None:
        if type(self.n) is not int or self.n <= 0:
            raise ValueError(
                f"evictors.count({self.n!r}): the count must be a positive integer, "
                "e.g. evictors.count(100)"
            )

    def evict(self, elements: list[Element]) -> list[Element]:
        """The last ``n`` of ``elements`` (``(timestamp, record)`` pairs in arrival order)."""
        return elements if len(elements) <= self.n else elements[len(elements) - self.n :]

    def describe(self) -> str:
        """The evictor as ``weir explain`` and ``GET /jobs/{job}`` show it."""
        return f"count({self.n}, do_evict_after={self.do_evict_after})"


@dataclass(frozen=True, slots=True)
class TimeEvictor:
    """Keeps a window's records with ``t > newest t - ms`` (``evictors.time``)."""

    ms: int
    do_evict_after: bool = False

    def __post_init__(self) -> None:
        if type(self.ms) is not int or self.ms <= 0:
            raise ValueError(
                f"evictors.time({self.ms!r}): the span must be a positive integer of "
                "milliseconds, e.g. evictors.time(10_000)"
            )

    def evict(self, elements: list[Element]) -> list[Element]:
        """The ``(timestamp, record)`` pairs within ``ms`` of the newest timestamp."""
        if not elements:
            return elements
        cutoff = max(e[0] for e in elements) - self.ms
        return [e for e in elements if e[0] > cutoff]

    def describe(self) -> str:
        """The evictor as ``weir explain`` and ``GET /jobs/{job}`` show it."""
        return f"time({self.ms}, do_evict_after={self.do_evict_after})"


Evictor = CountEvictor | TimeEvictor


def count(n: int, do_evict_after: bool = False) -> CountEvictor:
    """Keep the window's last ``n`` records (Flink's ``CountEvictor``).

    Args:
        n: records kept.
        do_evict_after: evict after the aggregate runs instead of before.
    """
    return CountEvictor(n, do_evict_after)


def time(ms: int, do_evict_after: bool = False) -> TimeEvictor:
    """Keep the records with ``t > newest t - ms`` (Flink's ``TimeEvictor``).

    Args:
        ms: how much event time before the newest record is kept.
        do_evict_after: evict after the aggregate runs instead of before.
    """
    return TimeEvictor(ms, do_evict_after)


__all__ = ["CountEvictor", "Evictor", "TimeEvictor", "count", "time"]
