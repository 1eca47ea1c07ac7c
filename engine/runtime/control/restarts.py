"""The job manager's restart strategy: Flink's failure-rate strategy.

A failure restarts every worker from the latest complete checkpoint unless ``max_failures``
restarts already happened within the last ``interval_ms``; then the job fails. A budget per
interval rather than per lifetime lets a job that fails once a week run for years, while a job
that fails again at once after every restart (a poison record, a broken sink) still stops.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class FailureRateRestarts:
    def __init__(
        self,
        max_failures: int,
        interval_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: seconds, monotonic (tests pass their own)."""
        self.max_failures = max_failures
        self.interval_ms = interval_ms
        self._clock = clock
        self._restarts: deque[float] = deque()

    def _forget_old(self, now: float) -> None:
        horizon = now - self.interval_ms / 1000.0
        while self._restarts and self._restarts[0] <= horizon:
            self._restarts.popleft()

    def allow(self) -> bool:
        """A failure now: True (and counted) when it may restart, False when the rate is spent."""
        now = self._clock()
        self._forget_old(now)
        if len(self._restarts) >= self.max_failures:
            return False
        self._restarts.append(now)
        return True

    @property
    def recent(self) -> int:
        """Restarts within the interval up to now."""
        self._forget_old(self._clock())
        return len(self._restarts)
