"""Watermark strategies: how a source split turns event times into watermarks.

A split's watermark after a record is ``max(event time seen in the split) - bound - 1``
(DESIGN.md, "Time"): Flink's DataStream rule (``BoundedOutOfOrdernessWatermarks``). Flink SQL's
``WATERMARK FOR ts AS ts - INTERVAL 'd'`` is ``max(ts) - d`` instead, one millisecond later:
``sql_delay(ms=d)`` is that rule, held as ``bound_ms = d - 1`` (so ``-1`` for ``AS ts``).

``per_record_watermarks`` computes, for a batch, the watermark each record *arrives under* (the
one left by the records before it): lateness is judged against that, so batching never changes
which records are late.

Event times cover the signed 64-bit range, so a watermark that would fall below it is
``MIN_WATERMARK`` (as Flink's bounded out-of-orderness generator, whose running maximum starts
at ``Long.MIN_VALUE + bound + 1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from types import ModuleType
from typing import Any

MIN_WATERMARK = -(1 << 63)
MAX_WATERMARK = (1 << 63) - 1
# from this many records a batch's running max goes through numpy: converting the column costs
# less than a Python ``max`` call per record
VECTOR_MIN = 64
_VECTOR_BOUND = 1 << 62  # a larger bound could overflow int64 near MIN_WATERMARK


@dataclass(frozen=True, slots=True)
class WatermarkStrategy:
    """Bounded out-of-orderness watermarks; ``idle_timeout_ms`` marks a quiet split idle."""

    bound_ms: int = 0
    idle_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if self.bound_ms < -1:  # -1: SQL's ``WATERMARK FOR ts AS ts`` (``sql_delay(ms=0)``)
            raise ValueError(f"out-of-orderness bound {self.bound_ms} ms is negative; use >= 0")
        if self.idle_timeout_ms is not None and self.idle_timeout_ms <= 0:
            raise ValueError(f"idle timeout {self.idle_timeout_ms} ms must be positive")

    @staticmethod
    def bounded_out_of_orderness(ms: int) -> WatermarkStrategy:
        """Flink's DataStream rule: the watermark is ``max(ts) - ms - 1``."""
        if ms < 0:
            raise ValueError(f"out-of-orderness bound {ms} ms is negative; use >= 0")
        return WatermarkStrategy(bound_ms=ms)

    @staticmethod
    def sql_delay(ms: int) -> WatermarkStrategy:
        """SQL's ``WATERMARK FOR ts AS ts - INTERVAL …``: the watermark is ``max(ts) - ms``
        (``bounded_out_of_orderness(ms)`` is ``max(ts) - ms - 1``, Flink's DataStream rule), so
        a record ``ms`` behind the newest is exactly at the watermark."""
        if ms < 0:
            raise ValueError(f"watermark delay {ms} ms is negative; use >= 0")
        return WatermarkStrategy(bound_ms=ms - 1)

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """For timestamps that never decrease: the watermark is ``max(ts) - 1``."""
        return WatermarkStrategy(bound_ms=0)

    def with_idleness(self, ms: int) -> WatermarkStrategy:
        """This strategy, with a split quiet for ``ms`` marked idle: it stops holding the
        watermark back until it has records again (``weir run --idle-timeout-ms``).

        Example:
            ``WatermarkStrategy.bounded_out_of_orderness(ms=2_000).with_idleness(30_000)``
        """
        return WatermarkStrategy(bound_ms=self.bound_ms, idle_timeout_ms=ms)

    def watermark_for(self, max_timestamp: int) -> int:
        """The watermark after a split has seen event times up to ``max_timestamp``:
        ``max_timestamp - bound - 1``, never below the least event time, ``-2**63``."""
        wm = max_timestamp - self.bound_ms - 1
        return wm if wm > MIN_WATERMARK else MIN_WATERMARK


def per_record_watermarks(
    timestamps: list[int], max_seen: int, bound_ms: int
) -> tuple[list[int], int]:
    """Watermark before each record and the new max timestamp of the split.

    ``max_seen`` is the split's max event time so far (``MIN_WATERMARK`` when none).
    """
    if not timestamps:
        return [], max_seen
    if len(timestamps) >= VECTOR_MIN and bound_ms < _VECTOR_BOUND and _numpy() is not None:
        try:
            return _vector_watermarks(timestamps, max_seen, bound_ms)
        except OverflowError:  # a time outside int64: the exact Python path below
            pass
    running = list(accumulate(timestamps, max, initial=max_seen))
    new_max = running.pop()
    wms = _shift(running, bound_ms)
    if wms[0] < MIN_WATERMARK:  # near the start of time (or nothing seen yet): clamp
        wms = [w if w > MIN_WATERMARK else MIN_WATERMARK for w in wms]
    return wms, new_max


def _shift(max_before: list[int], bound_ms: int) -> list[int]:
    return list(map((bound_ms + 1).__rsub__, max_before))


def _vector_watermarks(
    timestamps: list[int], max_seen: int, bound_ms: int
) -> tuple[list[int], int]:
    """``per_record_watermarks`` with numpy (as ``engine/spark/columnar.watermarks``): the max
    before each record clamped at ``MIN_WATERMARK + bound + 1`` first, so nothing overflows."""
    np: Any = _numpy()
    column = np.array(timestamps, dtype=np.int64)
    before = np.empty_like(column)
    before[0] = max_seen
    np.maximum.accumulate(column[:-1], out=before[1:])
    np.maximum(before, max(max_seen, MIN_WATERMARK + bound_ms + 1), out=before)
    before -= bound_ms + 1
    wms: list[int] = before.tolist()
    return wms, max(max_seen, int(column.max()))


@cache
def _numpy() -> ModuleType | None:
    """numpy, imported at the first large batch (``import weir`` and small jobs never pay for
    it); None without it (it comes with the ``spark`` extra): the Python path then."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy
