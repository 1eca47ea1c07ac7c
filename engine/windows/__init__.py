"""Window assigners: ``tumbling(ms=, offset_ms=)``, ``sliding(size_ms=, slide_ms=, offset_ms=)``,
``session(gap_ms=)``, ``dynamic_session(gap)``, ``cumulate(size_ms=, step_ms=, offset_ms=)``,
and the windows only triggers fire: ``count(n, slide=)`` and ``global_windows()``."""

from __future__ import annotations

from typing import Any

from weir.engine.windows.base import (
    MAX_TIME,
    MIN_TIME,
    TimeDomain,
    Window,
    cleanup_time,
    is_late,
    window_start_with_offset,
)
from weir.engine.windows.cumulate import CumulateWindows
from weir.engine.windows.global_windows import CountWindows, GlobalWindows
from weir.engine.windows.session import GapFunction, SessionWindows
from weir.engine.windows.sliding import SlidingWindows
from weir.engine.windows.tumbling import TumblingWindows

WindowAssigner = (
    TumblingWindows
    | SlidingWindows
    | SessionWindows
    | CumulateWindows
    | GlobalWindows
    | CountWindows
)


def tumbling(ms: int, *, offset_ms: int = 0, time: TimeDomain = "event") -> TumblingWindows:
    """Fixed-size windows of ``ms`` milliseconds, aligned to the epoch shifted by ``offset_ms``
    (Flink's offsets: ``offset_ms=-8 * 3_600_000`` gives days of UTC+8)."""
    return TumblingWindows(size_ms=ms, time=time, offset_ms=offset_ms)


def sliding(
    size_ms: int, slide_ms: int, *, offset_ms: int = 0, time: TimeDomain = "event"
) -> SlidingWindows:
    """Windows of ``size_ms``, one starting every ``slide_ms`` (aligned to the epoch shifted by
    ``offset_ms``); with ``slide_ms > size_ms`` a record between two windows is in none."""
    return SlidingWindows(size_ms=size_ms, slide_ms=slide_ms, time=time, offset_ms=offset_ms)


def session(
    gap_ms: int | None = None, *, gap: GapFunction | None = None, time: TimeDomain = "event"
) -> SessionWindows:
    """Per key, events at most ``gap_ms`` apart form one session ``[first t, last t + gap)``;
    ``gap=fn`` takes each record's gap from the record instead (``dynamic_session``)."""
    return SessionWindows(gap_ms=gap_ms, time=time, gap=gap)


def dynamic_session(gap: Any, *, time: TimeDomain = "event") -> SessionWindows:
    """Sessions whose gap is a function of the record, ``gap(record) -> ms`` (Flink's
    ``DynamicEventTimeSessionWindows.withDynamicGap``): a record's window is ``[t, t +
    gap(record))``; a gap that is not a positive integer sends the record to the dead letters."""
    return SessionWindows(time=time, gap=gap)


def cumulate(
    size_ms: int, step_ms: int, *, offset_ms: int = 0, time: TimeDomain = "event"
) -> CumulateWindows:
    """Per ``size_ms`` cycle (aligned to the epoch shifted by ``offset_ms``), windows from its
    start growing by ``step_ms``: ``[ws, ws + step)``, ``[ws, ws + 2*step)``, … ``[ws, ws +
    size)`` (Flink's CUMULATE)."""
    return CumulateWindows(size_ms=size_ms, step_ms=step_ms, time=time, offset_ms=offset_ms)


def count(n: int, *, slide: int | None = None) -> CountWindows:
    """Per key, in arrival order: every ``n`` records form a window (Flink's ``countWindow(n)``:
    a global window, purged by ``count(n)``); with ``slide=m``, every ``m`` records fire a
    window of the last ``n`` (Flink's ``countWindow(n, m)``: a count evictor of ``n`` and a
    count trigger of ``m``)."""
    return CountWindows(size=n, slide=slide)


def global_windows() -> GlobalWindows:
    """One window per key over all time; it never fires unless a ``.trigger(...)`` says so
    (Flink's ``GlobalWindows`` with its ``NeverTrigger``)."""
    return GlobalWindows()


__all__ = [
    "CountWindows",
    "GlobalWindows",
    "count",
    "global_windows",
    "CumulateWindows",
    "MAX_TIME",
    "MIN_TIME",
    "SessionWindows",
    "SlidingWindows",
    "TimeDomain",
    "TumblingWindows",
    "Window",
    "WindowAssigner",
    "cleanup_time",
    "cumulate",
    "dynamic_session",
    "is_late",
    "session",
    "sliding",
    "tumbling",
    "window_start_with_offset",
]
