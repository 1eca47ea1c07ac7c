"""What every window assigner offers the window operator, and the time arithmetic they share.

Event time covers the signed 64-bit range ``[MIN_TIME, MAX_TIME]`` (Flink's ``long``), and every
derived time is kept inside it, because each one is stored (8-byte namespaces, msgpack frames,
JSON, Spark longs):

- a window start below ``MIN_TIME`` is ``MIN_TIME`` (the first window starts with time);
- a window end past ``MAX_TIME`` is ``MAX_TIME``: every window that would end at or past it is
  one window ``[s, MAX_TIME)``, ``s`` the earliest of their starts, which also holds the instant
  ``MAX_TIME`` itself and fires, like any window, when the watermark reaches ``end - 1``;
- a cleanup time ``end - 1 + allowed lateness`` past ``MAX_TIME`` is ``MAX_TIME`` (Flink's
  ``TimeWindow.cleanupTime``), so the final watermark still finalizes every window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TimeDomain = Literal["event", "processing"]

MIN_TIME = -(1 << 63)
MAX_TIME = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open time interval ``[start, end)``."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """The last instant in the window: it fires when the watermark reaches this."""
        return self.end - 1


def window_start_with_offset(timestamp: int, offset: int, size: int) -> int:
    """The start of the window of ``size`` holding ``timestamp`` on a grid shifted by
    ``offset``: Flink's ``TimeWindow.getWindowStartWithOffset`` (Python's ``%`` is already the
    floor remainder Flink builds out of Java's), unbounded: callers clamp."""
    return timestamp - (timestamp - offset) % size


def clamp_start(start: int) -> int:
    return start if start > MIN_TIME else MIN_TIME


def cleanup_time(end: int, allowed_lateness_ms: int) -> int:
    """When the window ending at ``end`` can no longer change: Flink's ``cleanupTime``, its
    max timestamp plus the allowed lateness, clamped to ``MAX_TIME`` instead of overflowing."""
    t = end - 1 + allowed_lateness_ms
    return t if t < MAX_TIME else MAX_TIME


def is_late(end: int, allowed_lateness_ms: int, watermark: int) -> bool:
    """Is the window ending at ``end`` past its allowed lateness at ``watermark``? A record for
    it is then late (it goes to the late output and touches no state), and an emission of it
    is final (DESIGN.md, "Time"). Every operator, the backfill and the query API judge by this
    one rule."""
    t = end - 1 + allowed_lateness_ms
    return (t if t < MAX_TIME else MAX_TIME) <= watermark


def check_offset(kind: str, offset_ms: int, period_ms: int, period_name: str) -> None:
    """Flink's rule for window offsets: ``abs(offset) < period``."""
    if type(offset_ms) is not int or not abs(offset_ms) < period_ms:
        raise ValueError(
            f"{kind} window offset_ms={offset_ms!r} must be an integer with abs(offset) < the "
            f"{period_name} ({period_ms} ms); e.g. offset_ms=-8 * 3_600_000 for UTC+8 days"
        )
