"""Session windows: per key, events closer than ``gap_ms`` belong to one session
``[first t, last t + gap)``; a record that bridges two sessions merges them."""

from __future__ import annotations

from dataclasses import dataclass

from weir.engine.windows.base import TimeDomain


@dataclass(frozen=True, slots=True)
class SessionWindows:
    gap_ms: int
    time: TimeDomain = "event"

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError(f"session gap {self.gap_ms} ms must be positive")
        if self.time not in ("event", "processing"):
            raise ValueError(f"time={self.time!r}; use 'event' or 'processing'")

    def describe(self) -> dict[str, object]:
        return {"type": "session", "gap_ms": self.gap_ms, "time": self.time}
