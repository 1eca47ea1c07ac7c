"""The interval join as a keyed co-process function, with the rules of Flink's
``IntervalJoinOperator``:

- a pair ``(l, r)`` of one key joins when ``r.ts - l.ts`` lies in ``[lower, upper]``; an
  exclusive bound moves in by one millisecond first (``lower + 1``, ``upper - 1``);
- each record is buffered on its side and joined at once with what the other side's buffer
  holds, so a pair is emitted when its second record arrives, with timestamp
  ``max(l.ts, r.ts)``;
- a record older than the watermark it arrives under (``ts < watermark``) is late: it goes to
  the ``late`` side output and joins nothing (Flink drops it, or side-outputs it with
  ``sideOutputLeftLateData``);
- a left record at ``t`` can no longer join once the watermark reaches its cleanup time
  ``t + max(upper, 0)``, a right one at ``t + max(-lower, 0)`` (clamped to the 64-bit range).

Flink removes each record by a timer at its cleanup time. Here a lookup skips the entries whose
cleanup time the watermark has reached, which is what makes the join exact, and the timers that
remove them are rounded up to a grid of 1/16 of the interval's width (1 ms for narrow
intervals): a key then holds one timer per grid step instead of one per record, and a buffer
keeps at most that much of expired entries (visible to a query) before they go.

A function that raises sends the record to the dead letters (the runtime's rule); the record
stays buffered with its cleanup timer, and the pairs after the failing one are not emitted.

A record within its source's out-of-orderness bound is never late and its partners are still
buffered when it arrives, so for such input the result is every pair the bounds allow, whatever
the interleaving of the two inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.joins.buffers import (
    LEFT,
    RIGHT,
    JoinContext,
    between,
    drop_through,
    entries_of,
    insert,
    report_late,
    timestamp_of,
)
from weir.engine.nodes import OutputTag
from weir.engine.windows import MAX_TIME

ProcessJoinFn = Callable[[Any, Any, "PairContext"], None]


class PairContext:
    """What ``fn(left, right, ctx)`` sees for one joined pair (Flink's
    ``ProcessJoinFunction.Context``): the key, both timestamps, the pair's (the larger),
    ``emit`` and ``output`` to a side output."""

    __slots__ = ("_ctx", "left_timestamp", "right_timestamp")

    def __init__(self, ctx: JoinContext, left_timestamp: int, right_timestamp: int) -> None:
        self._ctx = ctx
        self.left_timestamp = left_timestamp
        self.right_timestamp = right_timestamp

    @property
    def key(self) -> str:
        """The key both records share."""
        return self._ctx.key

    @property
    def timestamp(self) -> int:
        """The pair's timestamp: the larger of the two records' (Flink's rule)."""
        return max(self.left_timestamp, self.right_timestamp)

    def emit(self, record: Any) -> None:
        """Emit ``record`` as the join's output."""
        self._ctx.emit(record)

    def output(self, tag: OutputTag, record: Any) -> None:
        """Write ``record`` to the side output ``tag`` (declared with ``side_output``)."""
        self._ctx.output(tag, record)


def default_pair(left: Any, right: Any, ctx: PairContext) -> None:
    """With no function: ``{"key", "left", "right", "ts"}``, ``ts`` the pair's timestamp."""
    ctx.emit({"key": ctx.key, "left": left, "right": right, "ts": ctx.timestamp})


class IntervalJoinFunction:
    """``process1`` takes left records, ``process2`` right ones; ``on_timer`` cleans buffers."""

    def __init__(
        self,
        lower_ms: int,
        upper_ms: int,
        *,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
        fn: ProcessJoinFn | None = None,
    ) -> None:
        # exclusive bounds move in by one, so that the join and the cleanup compare inclusively
        self.lower = lower_ms if lower_inclusive else lower_ms + 1
        self.upper = upper_ms if upper_inclusive else upper_ms - 1
        self._fn: ProcessJoinFn = fn or default_pair
        self._keep = (max(self.upper, 0), max(-self.lower, 0))  # cleanup offsets: left, right
        self._grid = max(1, (self.upper - self.lower) // 16)

    def process1(self, event: Any, ctx: JoinContext) -> None:
        """A left record: buffer it and join it with the right records in its interval."""
        t = timestamp_of(ctx)
        if t < ctx.watermark:
            report_late(ctx, LEFT, event)
            return
        insert(ctx, LEFT, t, event)
        ctx.register_event_time_timer(self._timer(t + self._keep[0]))  # before fn can raise
        lo = max(t + self.lower, _oldest_kept(ctx.watermark, self._keep[1]))
        for tr, right in between(entries_of(ctx, RIGHT), lo, t + self.upper):
            self._fn(event, right, PairContext(ctx, t, tr))

    def process2(self, event: Any, ctx: JoinContext) -> None:
        """A right record: buffer it and join it with the left records in its interval."""
        t = timestamp_of(ctx)
        if t < ctx.watermark:
            report_late(ctx, RIGHT, event)
            return
        insert(ctx, RIGHT, t, event)
        ctx.register_event_time_timer(self._timer(t + self._keep[1]))
        lo = max(t - self.upper, _oldest_kept(ctx.watermark, self._keep[0]))
        for tl, left in between(entries_of(ctx, LEFT), lo, t - self.lower):
            self._fn(left, event, PairContext(ctx, tl, t))

    def on_timer(self, timestamp: int, ctx: JoinContext) -> None:
        """Every entry whose cleanup time has come goes: a timer at ``c`` stands for all the
        key's cleanup times up to ``c`` (earlier ones fired first), on both sides."""
        drop_through(ctx, LEFT, _oldest_kept(timestamp, self._keep[0]) - 1)
        drop_through(ctx, RIGHT, _oldest_kept(timestamp, self._keep[1]) - 1)

    def _timer(self, cleanup: int) -> int:
        """The grid step at or after ``cleanup``, within the 64-bit range."""
        g = self._grid
        at = -(-cleanup // g) * g
        return at if at < MAX_TIME else MAX_TIME


def _oldest_kept(watermark: int, offset: int) -> int:
    """The oldest timestamp whose cleanup time ``min(ts + offset, MAX_TIME)`` the watermark
    has not reached; once the watermark is ``MAX_TIME``, none (every entry is due)."""
    return watermark - offset + 1 if watermark < MAX_TIME else MAX_TIME + 1
