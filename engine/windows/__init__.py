"""Window assigners: ``tumbling(ms=)``, ``sliding(size_ms=, slide_ms=)``, ``session(gap_ms=)``,
``cumulate(size_ms=, step_ms=)``."""

from __future__ import annotations

from weir.engine.windows.base import TimeDomain, Window, is_late
from weir.engine.windows.cumulate import CumulateWindows
from weir.engine.windows.session import SessionWindows
from weir.engine.windows.sliding import SlidingWindows
from weir.engine.windows.tumbling import TumblingWindows

WindowAssigner = TumblingWindows | SlidingWindows | SessionWindows | CumulateWindows


def tumbling(ms: int, *, time: TimeDomain = "event") -> TumblingWindows:
    """Fixed-size windows of ``ms`` milliseconds, aligned to the epoch."""
    return TumblingWindows(size_ms=ms, time=time)


def sliding(size_ms: int, slide_ms: int, *, time: TimeDomain = "event") -> SlidingWindows:
    """Windows of ``size_ms``, one starting every ``slide_ms`` (aligned to the epoch)."""
    return SlidingWindows(size_ms=size_ms, slide_ms=slide_ms, time=time)


def session(gap_ms: int, *, time: TimeDomain = "event") -> SessionWindows:
    """Per key, events closer than ``gap_ms`` form one session ``[first t, last t + gap)``."""
    return SessionWindows(gap_ms=gap_ms, time=time)


def cumulate(size_ms: int, step_ms: int, *, time: TimeDomain = "event") -> CumulateWindows:
    """Per ``size_ms`` cycle, windows from its start growing by ``step_ms``: ``[ws, ws + step)``,
    ``[ws, ws + 2*step)``, … ``[ws, ws + size)`` (Flink's CUMULATE)."""
    return CumulateWindows(size_ms=size_ms, step_ms=step_ms, time=time)


__all__ = [
    "CumulateWindows",
    "SessionWindows",
    "SlidingWindows",
    "TimeDomain",
    "TumblingWindows",
    "Window",
    "WindowAssigner",
    "cumulate",
    "is_late",
    "session",
    "sliding",
    "tumbling",
]
