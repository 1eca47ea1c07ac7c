"""Window assigners: ``windows.tumbling(ms=...)``."""

from __future__ import annotations

from engine.windows.base import TimeDomain, Window
from engine.windows.tumbling import TumblingWindows

WindowAssigner = TumblingWindows


def tumbling(ms: int, *, time: TimeDomain = "event") -> TumblingWindows:
    """Fixed-size windows of ``ms`` milliseconds, aligned to the epoch."""
    return TumblingWindows(size_ms=ms, time=time)


__all__ = ["TimeDomain", "TumblingWindows", "Window", "WindowAssigner", "tumbling"]
