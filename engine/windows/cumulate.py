"""Cumulating windows (Flink's CUMULATE): within each window of ``size``, aligned to the epoch
shifted by an offset, windows that all start at its start and end every ``step``: a record at
``t`` belongs to ``[ws, ws + k*step)`` for every ``k`` with ``ws + k*step > t`` (``ws = t - (t -
offset) mod size``), so
each window holds the running aggregate of its cycle so far. A window's end is unique per key
(cycles do not overlap), which is what the window operator keys its state by. At the end of
time, the windows of the last cycle that would end at or past ``MAX_TIME`` are one window
``[ws, MAX_TIME)``, and the first cycle starts no earlier than ``MIN_TIME`` (``base``)."""

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
class CumulateWindows:
    """SQL's CUMULATE (``windows.cumulate``): per ``size_ms`` cycle, windows from its start
    growing by ``step_ms``; a record is in every window of its cycle that ends after it."""

    size_ms: int
    step_ms: int
    time: TimeDomain = "event"
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.step_ms <= 0:
            raise ValueError(
                f"cumulate window size {self.size_ms} ms and step {self.step_ms} ms must be "
                "positive"
            )
        if self.size_ms % self.step_ms:
            raise ValueError(
                f"cumulate step {self.step_ms} ms does not divide the size {self.size_ms} ms; "
                "use a step that does (Flink's rule)"
            )
        check_offset("cumulate", self.offset_ms, self.size_ms, "size")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def assign(self, timestamp: int) -> list[Window]:
        """Every window holding ``timestamp``, latest first."""
        return [Window(self.start_of(end), end) for end in self.window_ends_of(timestamp)]

    def window_ends_of(self, t: int) -> list[int]:
        """Ends of every window holding ``t``, latest first."""
        o = self.offset_ms
        ws = window_start_with_offset(t, o, self.size_ms)
        first = window_start_with_offset(t, o, self.step_ms) + self.step_ms  # next boundary
        ends = list(range(ws + self.size_ms, first - 1, -self.step_ms))
        if ends[0] >= MAX_TIME:  # the windows at or past the end of time are one
            ends = [MAX_TIME, *(e for e in ends if e < MAX_TIME)]
        return ends

    def expand(self, timestamps: list[int]) -> tuple[list[int], list[int]]:
        """``(ends, origin)``: one entry per (record, window) pair; ``origin[i]`` is the index of
        the record the pair comes from."""
        size, step, o = self.size_ms, self.step_ms, self.offset_ms
        ends: list[int] = []
        origin: list[int] = []
        if o or (timestamps and max(timestamps) >= MAX_TIME - size):
            for i, t in enumerate(timestamps):
                edge = self.window_ends_of(t)
                ends += edge
                origin += [i] * len(edge)
            return ends, origin
        for i, t in enumerate(timestamps):
            last = t - t % size + size
            mine = range(last, t - t % step, -step)
            ends.extend(mine)
            origin.extend([i] * len(mine))
        return ends, origin

    def start_of(self, end: int) -> int:
        """The start of the window that ends at ``end``."""
        return clamp_start(window_start_with_offset(end - 1, self.offset_ms, self.size_ms))

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        shown: dict[str, object] = {
            "type": "cumulate",
            "size_ms": self.size_ms,
            "step_ms": self.step_ms,
        }
        if self.offset_ms:  # shown only when set: most windows are aligned to the epoch
            shown["offset_ms"] = self.offset_ms
        return {**shown, "time": self.time}
