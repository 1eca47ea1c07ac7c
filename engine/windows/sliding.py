"""Sliding windows: size ``s``, a new window every ``slide`` ms; ``[k*slide, k*slide + s)`` for
every ``k`` whose window holds ``t``, so a record counts in about ``s / slide`` windows."""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.windows.base import TimeDomain, Window


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    size_ms: int
    slide_ms: int
    time: TimeDomain = "event"

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError(
                f"sliding window size {self.size_ms} ms and slide {self.slide_ms} ms must be "
                "positive"
            )
        if self.slide_ms > self.size_ms:
            raise ValueError(
                f"slide {self.slide_ms} ms is longer than the size {self.size_ms} ms: records "
                "between windows would be lost; use slide <= size (or tumbling windows)"
            )
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def assign(self, timestamp: int) -> list[Window]:
        """Every window holding ``timestamp``, latest first."""
        return [Window(end - self.size_ms, end) for end in self._ends(timestamp)]

    def window_ends_of(self, t: int) -> list[int]:
        """Ends of every window holding ``t``, latest first."""
        return self._ends(t)

    def _ends(self, t: int) -> list[int]:
        s, d = self.size_ms, self.slide_ms
        start = t - t % d
        ends = []
        while start > t - s:
            ends.append(start + s)
            start -= d
        return ends

    def expand(self, timestamps: list[int]) -> tuple[list[int], list[int]]:
        """``(ends, origin)``: one entry per (record, window) pair; ``origin[i]`` is the index of
        the record the pair comes from."""
        s, d = self.size_ms, self.slide_ms
        ends: list[int] = []
        origin: list[int] = []
        for i, t in enumerate(timestamps):
            start = t - t % d
            while start > t - s:
                ends.append(start + s)
                origin.append(i)
                start -= d
        return ends, origin

    def start_of(self, end: int) -> int:
        return end - self.size_ms

    def describe(self) -> dict[str, object]:
        return {
            "type": "sliding",
            "size_ms": self.size_ms,
            "slide_ms": self.slide_ms,
            "time": self.time,
        }
