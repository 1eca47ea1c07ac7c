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
