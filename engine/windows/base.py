"""What every window assigner offers the window operator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TimeDomain = Literal["event", "processing"]


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open time interval ``[start, end)``."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """The last instant in the window: it fires when the watermark reaches this."""
        return self.end - 1


def is_late(end: int, allowed_lateness_ms: int, watermark: int) -> bool:
    """Is the window ending at ``end`` past its allowed lateness at ``watermark``? A record for
    it is then late (it goes to the late output and touches no state), and an emission of it
    is final (DESIGN.md, "Time"). Every operator, the backfill and the query API judge by this
    one rule."""
    return end - 1 + allowed_lateness_ms <= watermark
