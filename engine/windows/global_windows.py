"""Global and count windows: one window per key that spans all time (Flink's ``GlobalWindows``),
which only a trigger fires; a count window is a global window with a count trigger (and, when it
slides, a count evictor).

A global window is stored under ``MAX_TIME`` (Flink's ``GlobalWindow.maxTimestamp``); what it
reports as ``start``/``end`` is the span of the records it aggregated: the least timestamp and
the greatest plus one.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.windows.base import MAX_TIME, MIN_TIME, TimeDomain


class _OneWindow:
    """Every record is in the one window ``[MIN_TIME, MAX_TIME)``."""

    __slots__ = ()

    def expand(self, timestamps: list[int]) -> tuple[list[int], None]:
        return [MAX_TIME] * len(timestamps), None

    def start_of(self, end: int) -> int:
        return MIN_TIME


@dataclass(frozen=True, slots=True)
class GlobalWindows(_OneWindow):
    """One window per key over all time (``windows.global_windows``); it fires only when a
    trigger says so, and is never late nor cleaned up."""

    time: TimeDomain = "event"

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        return {"type": "global"}


@dataclass(frozen=True, slots=True)
class CountWindows(_OneWindow):
    """``count(n)``: fire and purge every ``n`` records of a key; ``count(n, slide=m)``: every
    ``m`` records, over the last ``n`` (in arrival order)."""

    size: int
    slide: int | None = None
    time: TimeDomain = "event"

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size <= 0:
            raise ValueError(
                f"windows.count({self.size!r}): the count must be a positive integer, "
                "e.g. windows.count(100)"
            )
        if self.slide is not None and (type(self.slide) is not int or self.slide <= 0):
            raise ValueError(
                f"windows.count({self.size}, slide={self.slide!r}): the slide must be a "
                "positive integer, e.g. slide=10"
            )

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        shown: dict[str, object] = {"type": "count", "size": self.size}
        if self.slide is not None:
            shown["slide"] = self.slide
        return shown
