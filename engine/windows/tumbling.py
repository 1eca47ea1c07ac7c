"""Tumbling windows: fixed-size, non-overlapping, aligned to the epoch shifted by an offset."""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.windows.base import (
    MAX_TIME,
    TimeDomain,
    Window,
    check_offset,
    clamp_start,
    window_start_with_offset,
)


@dataclass(frozen=True, slots=True)
class TumblingWindows:
    """Windows ``[s, s + size)`` with ``s = t - (t - offset) mod size`` (Flink's
    ``getWindowStartWithOffset``), clamped to the 64-bit range (``base``)."""

    size_ms: int
    time: TimeDomain = "event"
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"tumbling window size {self.size_ms} ms must be positive")
        check_offset("tumbling", self.offset_ms, self.size_ms, "size")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def assign(self, timestamp: int) -> Window:
        """The one window holding ``timestamp``."""
        end = self.window_ends([timestamp])[0]
        return Window(self.start_of(end), end)

    def window_ends(self, timestamps: list[int]) -> list[int]:
        """End of the one window each timestamp falls in (the batch form)."""
        s, o = self.size_ms, self.offset_ms
        if o:
            ends = [t - (t - o) % s + s for t in timestamps]
        else:
            ends = [t - t % s + s for t in timestamps]
        if ends and max(ends) > MAX_TIME:  # the window past the end of time: saturate
            ends = [e if e < MAX_TIME else MAX_TIME for e in ends]
        return ends

    def expand(self, timestamps: list[int]) -> tuple[list[int], None]:
        """``(ends, origin)``: one window per record, so no origin map is needed."""
        return self.window_ends(timestamps), None

    def start_of(self, end: int) -> int:
        """The start of the window that ends at ``end``."""
        if end == MAX_TIME:  # the saturated last window starts where the one holding MAX - 1 does
            return window_start_with_offset(MAX_TIME - 1, self.offset_ms, self.size_ms)
        return clamp_start(end - self.size_ms)

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        shown: dict[str, object] = {"type": "tumbling", "size_ms": self.size_ms}
        if self.offset_ms:  # shown only when set: most windows are aligned to the epoch
            shown["offset_ms"] = self.offset_ms
        return {**shown, "time": self.time}
