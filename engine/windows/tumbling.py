"""Tumbling windows: fixed-size, non-overlapping, aligned to the epoch."""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.windows.base import TimeDomain, Window


@dataclass(frozen=True, slots=True)
class TumblingWindows:
    """Windows ``[t - t mod size, t - t mod size + size)``."""

    size_ms: int
    time: TimeDomain = "event"

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"tumbling window size {self.size_ms} ms must be positive")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def assign(self, timestamp: int) -> Window:
        start = timestamp - timestamp % self.size_ms
        return Window(start, start + self.size_ms)

    def window_ends(self, timestamps: list[int]) -> list[int]:
        """End of the one window each timestamp falls in (the batch form)."""
        s = self.size_ms
        return [t - t % s + s for t in timestamps]

    def expand(self, timestamps: list[int]) -> tuple[list[int], None]:
        """``(ends, origin)``: one window per record, so no origin map is needed."""
        return self.window_ends(timestamps), None

    def start_of(self, end: int) -> int:
        return end - self.size_ms

    def describe(self) -> dict[str, object]:
        return {"type": "tumbling", "size_ms": self.size_ms, "time": self.time}
