"""Sliding windows: size ``s``, a new window every ``slide`` ms on a grid shifted by an offset:
``[k*slide + offset, k*slide + offset + s)`` for every ``k`` whose window holds ``t``, so a
record counts in about ``s / slide`` windows. A slide longer than the size leaves gaps between
the windows (Flink's sliding windows allow it): a record in a gap belongs to no window. The
windows that would end at or past the end of time are one window ending at ``MAX_TIME``
(``base``).

The operator folds records into panes (tumbling windows of ``gcd(size, slide)`` on the same
grid) and composes windows from them; the pane helpers here keep that grid and the clamping in
one place for the operator, the backfill and the query API.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from weir.engine.windows.base import (
    MAX_TIME,
    MIN_TIME,
    TimeDomain,
    Window,
    check_offset,
    clamp_start,
    window_start_with_offset,
)


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Sliding windows (``windows.sliding``): every ``[k*slide + offset, … + size)`` holding
    a record's time; computed on panes of ``gcd(size, slide)``, so a record is folded once."""

    size_ms: int
    slide_ms: int
    time: TimeDomain = "event"
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError(
                f"sliding window size {self.size_ms} ms and slide {self.slide_ms} ms must be "
                "positive"
            )
        check_offset("sliding", self.offset_ms, self.slide_ms, "slide")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def assign(self, timestamp: int) -> list[Window]:
        """Every window holding ``timestamp``, latest first."""
        return [Window(self.start_of(end), end) for end in self._ends(timestamp)]

    @property
    def gapped(self) -> bool:
        """Are there gaps between the windows (slide > size), times in no window?"""
        return self.slide_ms > self.size_ms

    def window_ends_of(self, t: int) -> list[int]:
        """Ends of every window holding ``t``, latest first (none for a time in a gap)."""
        return self._ends(t)

    def _ends(self, t: int) -> list[int]:
        s = self.size_ms
        start = window_start_with_offset(t, self.offset_ms, self.slide_ms)
        ends = []
        while start > t - s:
            ends.append(start + s)
            start -= self.slide_ms
        if ends and ends[0] >= MAX_TIME:  # the windows at or past the end of time are one
            ends = [MAX_TIME, *(e for e in ends if e < MAX_TIME)]
        return ends

    def expand(self, timestamps: list[int]) -> tuple[list[int], list[int]]:
        """``(ends, origin)``: one entry per (record, window) pair; ``origin[i]`` is the index of
        the record the pair comes from."""
        s, d, o = self.size_ms, self.slide_ms, self.offset_ms
        if timestamps and max(timestamps) >= MAX_TIME - s:
            return self._expand_one_by_one(timestamps)
        ends: list[int] = []
        origin: list[int] = []
        for i, t in enumerate(timestamps):
            start = t - (t - o) % d if o else t - t % d
            while start > t - s:
                ends.append(start + s)
                origin.append(i)
                start -= d
        return ends, origin

    def _expand_one_by_one(self, timestamps: list[int]) -> tuple[list[int], list[int]]:
        ends: list[int] = []
        origin: list[int] = []
        for i, t in enumerate(timestamps):
            mine = self._ends(t)
            ends += mine
            origin += [i] * len(mine)
        return ends, origin

    def start_of(self, end: int) -> int:
        """The start of the window that ends at ``end``."""
        return clamp_start(self._raw_start(end))

    def _raw_start(self, end: int) -> int:
        if end == MAX_TIME:  # the earliest start of the windows that end at or past MAX_TIME
            lowest = MAX_TIME - self.size_ms
            return lowest + (self.offset_ms - lowest) % self.slide_ms
        return end - self.size_ms

    # -- panes -------------------------------------------------------------------------------

    @property
    def pane_ms(self) -> int:
        """The pane size, ``gcd(size_ms, slide_ms)``: every window is a run of whole panes."""
        return gcd(self.size_ms, self.slide_ms)

    def pane_end(self, t: int) -> int:
        """The end of the pane holding ``t`` (the last pane ends at ``MAX_TIME``)."""
        g = self.pane_ms
        end = t - (t - self.offset_ms) % g + g
        return end if end < MAX_TIME else MAX_TIME

    def pane_ends(self, timestamps: list[int]) -> list[int]:
        """The end of the pane holding each timestamp (the batch form of ``pane_end``)."""
        g, o = self.pane_ms, self.offset_ms
        if o:
            ends = [t - (t - o) % g + g for t in timestamps]
        else:
            ends = [t - t % g + g for t in timestamps]
        if ends and max(ends) > MAX_TIME:
            ends = [e if e < MAX_TIME else MAX_TIME for e in ends]
        return ends

    def first_ends_after(self, timestamps: list[int]) -> list[int]:
        """Per timestamp, the end of the first window holding it (the batch form of
        ``first_end_at_or_after(t + 1)``)."""
        d, top = self.slide_ms, self.offset_ms + self.size_ms
        ends = [top - (top - 1 - t) // d * d for t in timestamps]
        if ends and max(ends) > MAX_TIME:
            ends = [e if e < MAX_TIME else MAX_TIME for e in ends]
        return ends

    def first_end_at_or_after(self, x: int) -> int:
        """The smallest window end ``>= x`` (``MAX_TIME`` when it would be past it)."""
        s, d = self.size_ms, self.slide_ms
        k = -(-(x - s - self.offset_ms) // d)
        end = k * d + self.offset_ms + s
        return end if end < MAX_TIME else MAX_TIME

    def ends_holding_pane(self, pane_end: int) -> list[int]:
        """Ends of every window holding the pane that ends at ``pane_end``, in order."""
        return self.window_ends_of(pane_end - 1)[::-1]

    def panes_of(self, end: int) -> list[int]:
        """Ends of the panes the window ending at ``end`` is made of, in order."""
        g = self.pane_ms
        first = self._raw_start(end) + g
        while first <= MIN_TIME:  # a pane ending before time began holds nothing
            first += g
        panes = list(range(first, min(end, MAX_TIME - 1) + 1, g))
        if end == MAX_TIME and (not panes or panes[-1] != MAX_TIME):
            panes.append(MAX_TIME)
        return panes

    def describe(self) -> dict[str, object]:
        """The assigner as ``GET /jobs/{job}`` and ``weir explain`` show it."""
        shown: dict[str, object] = {
            "type": "sliding",
            "size_ms": self.size_ms,
            "slide_ms": self.slide_ms,
        }
        if self.offset_ms:  # shown only when set: most windows are aligned to the epoch
            shown["offset_ms"] = self.offset_ms
        return {**shown, "time": self.time}
