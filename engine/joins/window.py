"""The window join as a keyed co-process function (Flink's ``a.join(b).where(..).equal_to(..)
.window(..).apply(..)``, an inner join): every left and right record of one key in one window
make a pair, emitted when the watermark reaches the window's ``end - 1``, as the window operator
fires; the window's records then leave the buffers.

Records are buffered once per side, sorted by timestamp (``buffers.py``); a window's pairs are
the entries of both sides within ``[start, end)`` when it fires, so a sliding window does not
copy its records into every window. Lateness is the window operator's, with no allowed lateness:

- tumbling and sliding windows: a record joins the windows that have not fired
  (``end - 1 > watermark``); late for every window it belongs to, it goes to the ``late`` side
  output. An entry leaves its buffer when the latest window holding it fires.
- session windows: a record's window ``[t, t + gap)`` merges, per key and across both sides,
  with every session it touches or overlaps (Flink's ``TimeWindow.intersects``); lateness is
  judged on the merged session. The key's sessions are a value state ``sessions``
  (``[[start, end], ...]``) and each session fires by a timer at its ``end - 1``, moved when a
  merge moves the end.

A join function that raises sends the window's timer (key and time) to the dead letters (the
runtime's rule); the window's remaining pairs are not emitted, and its records still go.
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
from weir.engine.windows import (
    MAX_TIME,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    is_late,
)

JoinFn = Callable[[Any, Any], Any]
SESSIONS = "sessions"


class WindowJoinFunction:
    """``process1`` takes left records, ``process2`` right ones, ``on_timer`` fires windows.
    ``fn(left, right)`` makes a pair's record (``None``: no record); without one, the record is
    ``{"key", "start", "end", "left", "right"}``."""

    def __init__(
        self, assigner: TumblingWindows | SlidingWindows | SessionWindows, fn: JoinFn | None
    ) -> None:
        self.assigner = assigner
        self._fn = fn

    def process1(self, event: Any, ctx: JoinContext) -> None:
        """A left record: kept in each of its windows until they fire."""
        self._add(LEFT, event, ctx)

    def process2(self, event: Any, ctx: JoinContext) -> None:
        """A right record: kept in each of its windows until they fire."""
        self._add(RIGHT, event, ctx)

    def on_timer(self, timestamp: int, ctx: JoinContext) -> None:
        """The window ending at ``timestamp + 1`` fires: every left and right pair in it."""
        end = timestamp + 1
        if isinstance(self.assigner, SessionWindows):
            start = _pop_session(ctx, end)
            if start is None:
                return
            upto = end - 1 if end < MAX_TIME else MAX_TIME  # the last session holds MAX_TIME
        else:
            start, upto = self.assigner.start_of(end), self._last_retired(end)
        try:
            self._emit(ctx, start, end)
        finally:  # a join function that raises loses the window's pairs, never its cleanup
            drop_through(ctx, LEFT, upto)
            drop_through(ctx, RIGHT, upto)

    # -- input -----------------------------------------------------------------------------------

    def _add(self, side: str, event: Any, ctx: JoinContext) -> None:
        t = timestamp_of(ctx)
        if isinstance(self.assigner, SessionWindows):
            if not _merge_session(self.assigner, event, t, ctx):
                report_late(ctx, side, event)
                return
        else:
            live = [e for e in self._ends(t) if not is_late(e, 0, ctx.watermark)]
            if not live:
                report_late(ctx, side, event)
                return
            for end in live:
                ctx.register_event_time_timer(end - 1)
        insert(ctx, side, t, event)

    def _ends(self, t: int) -> list[int]:
        """The ends of the windows holding ``t``, latest first."""
        if isinstance(self.assigner, TumblingWindows):
            size, offset = self.assigner.size_ms, self.assigner.offset_ms
            end = t - (t - offset) % size + size  # TumblingWindows.window_ends, for one record
            return [end if end < MAX_TIME else MAX_TIME]
        assert isinstance(self.assigner, SlidingWindows)
        return self.assigner.window_ends_of(t)

    def _last_retired(self, end: int) -> int:
        """The newest timestamp whose every window ends at or before ``end``: once the window
        ending at ``end`` fired, entries up to it belong to no window that can still fire."""
        if end >= MAX_TIME:
            return MAX_TIME
        if isinstance(self.assigner, TumblingWindows):
            return end - 1
        assert isinstance(self.assigner, SlidingWindows)
        # the latest window holding t ends at start(t) + size, which grows with t: the last t
        # whose latest window ends by ``end`` is just before the next window's start
        return end - self.assigner.size_ms + self.assigner.slide_ms - 1

    # -- output ----------------------------------------------------------------------------------

    def _emit(self, ctx: JoinContext, start: int, end: int) -> None:
        hi = end - 1 if end < MAX_TIME else MAX_TIME
        rights = between(entries_of(ctx, RIGHT), start, hi)
        if not rights:
            return
        for _, left in between(entries_of(ctx, LEFT), start, hi):
            for _, right in rights:
                if self._fn is None:
                    ctx.emit(
                        {"key": ctx.key, "start": start, "end": end, "left": left, "right": right}
                    )
                    continue
                out = self._fn(left, right)
                if out is not None:
                    ctx.emit(out)


# -- sessions ------------------------------------------------------------------------------------


def _merge_session(assigner: SessionWindows, event: Any, t: int, ctx: JoinContext) -> bool:
    """Merge the record's window into the key's sessions; ``False`` (nothing changed) when the
    merged session has fired already, i.e. the record is late."""
    gap, reason = assigner.gap_of(event)
    if reason is not None:
        raise ValueError(reason)
    start, end = t, SessionWindows.end_of(t, gap)
    state = ctx.value(SESSIONS)
    sessions: list[list[int]] = state.get() or []
    touching = [s for s in sessions if s[0] <= end and s[1] >= start]
    for s in touching:
        start, end = min(start, s[0]), max(end, s[1])
    if is_late(end, 0, ctx.watermark):
        return False
    for s in touching:
        if s[1] != end:
            ctx.delete_event_time_timer(s[1] - 1)
    kept = [s for s in sessions if not (s[0] <= end and s[1] >= start)]
    kept.append([start, end])
    kept.sort()
    state.set(kept)
    ctx.register_event_time_timer(end - 1)
    return True


def _pop_session(ctx: JoinContext, end: int) -> int | None:
    """Remove the key's session ending at ``end``; its start (``None``: no such session)."""
    state = ctx.value(SESSIONS)
    sessions: list[list[int]] = state.get() or []
    found = next((s for s in sessions if s[1] == end), None)
    if found is None:
        return None
    kept = [s for s in sessions if s is not found]
    if kept:
        state.set(kept)
    else:
        state.clear()
    return found[0]
