"""Session windows: per key, a record's window is ``[t, t + gap)`` and windows that overlap or
touch merge, so events at most the gap apart belong to one session ``[first t, last t + gap)``.

The gap is fixed (``gap_ms``) or a function of the record (``gap``: Flink's
``DynamicEventTimeSessionWindows``); a record whose gap is not a positive integer goes to the
dead letters. A session end past ``MAX_TIME`` is ``MAX_TIME`` (``base``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.engine.windows.base import MAX_TIME, TimeDomain

GapFunction = Callable[[Any], int]


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Session windows (``windows.session``, ``windows.dynamic_session``): a record's window
    ``[t, t + gap)`` merges with every session of its key it overlaps or touches."""

    gap_ms: int | None = None
    time: TimeDomain = "event"
    gap: GapFunction | None = None

    def __post_init__(self) -> None:
        if (self.gap_ms is None) == (self.gap is None):
            raise ValueError(
                "session windows need one gap: gap_ms=<ms> (fixed) or gap=<function of the "
                f"record> (dynamic); got gap_ms={self.gap_ms!r}, gap={self.gap!r}"
            )
        if self.gap is not None and not callable(self.gap):
            raise ValueError(f"session gap={self.gap!r} must be a function of the record")
        if self.gap_ms is not None and (type(self.gap_ms) is not int or self.gap_ms <= 0):
            raise ValueError(f"session gap {self.gap_ms!r} ms must be a positive integer")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    @property
    def dynamic(self) -> bool:
        """Whether the gap is a function of the record."""
        return self.gap is not None

    def gap_of(self, record: Any) -> tuple[int, str | None]:
        """``(gap, None)``, or ``(0, reason)`` when the record's gap is unusable."""
        if self.gap is None:
            assert self.gap_ms is not None
            return self.gap_ms, None
        try:
            g = self.gap(record)
        except Exception as exc:  # noqa: BLE001 - a bad record never stops the job
            return 0, f"session gap function raised {type(exc).__name__}: {exc}"
        if type(g) is not int or g <= 0:
            return 0, f"session gap {g!r} is not a positive integer of milliseconds"
        return g, None

    @staticmethod
    def end_of(t: int, gap: int) -> int:
        """The end of a record's own window, ``t + gap``, saturated at the end of time."""
        end = t + gap
        return end if end < MAX_TIME else MAX_TIME

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        gap: object = self.gap_ms if self.gap is None else "dynamic"
        return {"type": "session", "gap_ms": gap, "time": self.time}
