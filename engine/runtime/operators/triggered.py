"""The triggered window operator: windows whose firing a trigger decides (count and global
windows, ``.trigger(...)``, ``.evictor(...)``), as Flink's ``WindowOperator`` and
``EvictingWindowOperator`` run them. Every other window keeps the accumulator fast path
(``window.py``, ``sliding.py``); this one works record by record, which a trigger needs anyway
(a count trigger fires *between* two records of a batch).

Configuration: the operator (assigner, trigger, evictor, lateness), its fold plan, the clock.
Transient: nothing beyond the process runtime's cache. Checkpointed: each key's windows and
trigger state as one keyed state, and the timers, through the process runtime
(``process.py``), so snapshots, restore and rescale by key groups work as for process
functions; the stored form is ``stored/triggered.py``'s.

Per record (Flink's ``processElement``): each window it belongs to that is not past its
cleanup time (``end - 1 + allowed lateness``, event-time windows only) takes it and asks the
trigger; a record no window takes goes to the late output. A firing emits the window's
aggregate (after an evictor that evicts before, and then one that evicts after); a purge clears
the contents. A timer asks every window of the key (a trigger only answers to its own times),
then cleans up the windows whose cleanup time it is. Global windows are never late and never
cleaned up. ``final`` is true when the emitted ``(key, start, end)`` will not change again:
a time window past its allowed lateness, or a global window's purged contents.

Session windows merge as Flink's ``MergingWindowSet`` merges them: a record's window
``[t, t + gap)`` and every window of its key it overlaps or touches become one window, unless
that merged window is past its cleanup time (then the record is late and nothing merges). The
merged window's contents are the union (an evictor's records in the merged windows' time
order, then the new record), its trigger state what the trigger's ``on_merge`` makes of theirs.
Timers of the windows merged away stay registered: a trigger and the cleanup only answer to
the times of the windows that exist when they fire.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from weir.engine import triggers
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.runtime.messages import TopStatus
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.process import EVENT, PROCESSING, Context, ProcessRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored import triggered as stored
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.windows import MAX_TIME, MIN_TIME, SessionWindows, cleanup_time, is_late
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange

Clock = Callable[[], int]


def wall_clock() -> int:
    return int(time.time() * 1000)


def _end_of_time() -> int:
    return MAX_TIME


class _TriggerContext:
    """``triggers.TriggerContext`` for one window of one key."""

    def __init__(self, fn: _WindowFunction, ctx: Context, entry: stored.Entry, watermark: int):
        self._fn, self._ctx, self.state, self.watermark = fn, ctx, entry["tr"], watermark

    @property
    def now(self) -> int:
        return self._fn.clock()

    def register_event_time_timer(self, at: int) -> None:
        self._ctx.register_event_time_timer(at)

    def register_processing_time_timer(self, at: int) -> None:
        self._ctx.register_processing_time_timer(at)


class _WindowFunction:
    """The window logic, run by a ``ProcessRuntime`` as its process function."""

    def __init__(
        self,
        op: WindowNode,
        late: LateRecords,
        dead: DeadLetters,
        clock: Clock,
        retention_ms: int,
    ) -> None:
        self.op = op
        self.retention_ms = retention_ms
        self.dropped = 0  # closed windows whose retention passed, since the last purge
        self.data_watermark = MIN_TIME  # kept by the runtime: retention counts from it
        self.plan = FoldPlan(op.aggregates, op.name)  # result records name their operator
        self.clock = clock
        self.timer_kind = EVENT
        self._late, self._dead = late, dead
        self._global = stored.is_global(op)
        self._sessions = op.assigner if isinstance(op.assigner, SessionWindows) else None
        self._event = op.assigner.time == "event" and not self._global
        default: triggers.Trigger = (
            triggers.event_time() if op.assigner.time == "event" else triggers.processing_time()
        )
        self._trigger = op.trigger or default
        self._evictor = op.evictor
        self._lateness = op.allowed_lateness_ms

    def _windows_of(self, t: int) -> list[tuple[int, int]]:
        assigner = self.op.assigner
        if self._global:
            return [(MIN_TIME, MAX_TIME)]
        ends, _ = assigner.expand([t])  # type: ignore[union-attr]  # not sessions: _session_of
        # by end, as timers visit them, so a record's firings come in one documented order
        return [(assigner.start_of(e), e) for e in sorted(ends)]  # type: ignore[union-attr]

    def _max_ts(self, end: int) -> int:
        return MAX_TIME if self._global else end - 1

    def process(self, rec: Any, ctx: Context) -> None:
        t = int(ctx.timestamp or 0) if self.op.assigner.time == "event" else self.clock()
        wm = ctx.watermark
        state = ctx.value(stored.STATE_NAME)
        table: dict[int, stored.Entry] = state.get() or {}
        reason = self.plan.bad_field(rec)
        if reason is not None:  # the late decision first, as in Flink
            if self._late_record(rec, t, wm, table):
                self._late.add(self.op.name, ctx.key, t, wm, rec)
            else:
                self._dead.add(f"aggregate:{self.op.name}", *reason, rec)
            return
        if self._sessions is None:
            windows = self._windows_of(t)
            if not windows:  # in a gap between sliding windows: in no window, not late
                return
        else:
            merged = self._session_of(rec, t, ctx, table)
            if merged is None:
                return
            windows = [merged]
        taken = False
        for start, end in windows:
            if self._event and cleanup_time(end, self._lateness) <= wm:
                continue  # Flink's isWindowLate: past its allowed lateness
            taken = True
            entry = table.get(end)
            if entry is None:
                entry = table[end] = stored.new_entry(start, end, self._evictor is not None)
            self._add(entry, t, rec)
            tctx = _TriggerContext(self, ctx, entry, wm)
            decision = self._trigger.on_element(t, self._max_ts(end), tctx)
            if decision.fire:
                self._emit(ctx, entry, decision.purge, wm)
            self._register_cleanup(ctx, end)
        state.set(table)
        if not taken:
            self._late.add(self.op.name, ctx.key, t, wm, rec)

    def _late_record(self, rec: Any, t: int, wm: int, table: dict[int, stored.Entry]) -> bool:
        """Would ``rec`` be late (every window it would join past its cleanup time)? Nothing
        changes: a session is merged only to find its end."""
        if not self._event:
            return False
        if self._sessions is None:
            ends = [end for _, end in self._windows_of(t)]
        else:
            gap, why = self._sessions.gap_of(rec)
            if why is not None:
                return False
            start, end = t, self._sessions.end_of(t, gap)
            ends = [max([end, *(e for e, x in table.items() if int(x["s"]) <= end and start <= e)])]
        return bool(ends) and all(cleanup_time(e, self._lateness) <= wm for e in ends)

    def _session_of(
        self, rec: Any, t: int, ctx: Context, table: dict[int, stored.Entry]
    ) -> tuple[int, int] | None:
        """The record's session, merged into ``table`` unless it is late (then ``process``
        sends the record to the late output); ``None`` for a record without a usable gap."""
        assert self._sessions is not None
        gap, why = self._sessions.gap_of(rec)
        if why is not None:
            self._dead.add(f"gap:{self.op.name}", "unusable-gap", why, rec)
            return None
        start, end = t, self._sessions.end_of(t, gap)
        # Flink's TimeWindow.intersects: touching windows merge
        ends = sorted(e for e, entry in table.items() if int(entry["s"]) <= end and start <= e)
        start = min([start, *(int(table[e]["s"]) for e in ends)])
        end = max([end, *ends])
        if self._event and cleanup_time(end, self._lateness) <= ctx.watermark:
            return start, end  # late even merged: nothing merges, as Flink retires it
        if ends and (ends != [end] or int(table[end]["s"]) != start):
            old = [table.pop(e) for e in ends]
            entry = table[end] = stored.merge_entries(self.plan, old, start, end)
            tctx = _TriggerContext(self, ctx, entry, ctx.watermark)
            self._trigger.on_merge(end - 1, [o["tr"] for o in old], tctx)
        return start, end

    def _add(self, entry: stored.Entry, t: int, rec: Any) -> None:
        if "el" in entry:
            entry["el"].append([t, rec])
            return
        entry["acc"] = stored.fold_records(self.plan, entry.get("acc"), [rec])
        entry["lo"] = min(int(entry.get("lo", t)), t)
        entry["hi"] = max(int(entry.get("hi", t)), t)

    def _register_cleanup(self, ctx: Context, end: int) -> None:
        if self._global:
            return  # Flink: a global window's cleanup time is Long.MAX, never registered
        if self._event:
            ctx.register_event_time_timer(cleanup_time(end, self._lateness))
        else:
            ctx.register_processing_time_timer(end - 1)

    def _emit(self, ctx: Context, entry: stored.Entry, purge: bool, wm: int) -> None:
        slots, lo, hi = stored.contents(self.plan, self._evictor, entry)
        if slots is None:
            return  # Flink emits nothing for a window without contents
        start, end = stored.span(self.op, entry, lo, hi)
        if not self._event and not self._global:  # processing-time windows: the clock's time
            wm = max(wm, self.clock())
        final = purge if self._global else is_late(end, self._lateness, wm)
        ctx.emit(self.plan.result(ctx.key, start, end, slots, final))
        if not final and not self._global:
            entry["pending"] = slots  # owed a final emission at its cleanup time
        elif final:
            entry.pop("pending", None)  # paid: the cleanup emits nothing more
        if self._evictor is not None and "el" in entry:
            # before or after the function, what the evictor removed leaves the window's state
            # (Flink's EvictingWindowOperator writes back what is left after both)
            entry["el"] = self._evictor.evict(entry["el"])
        if purge:
            entry["last"] = [start, end, slots, final]
            self._clear_contents(entry)

    @staticmethod
    def _clear_contents(entry: stored.Entry) -> None:
        for field in ("acc", "lo", "hi"):
            entry.pop(field, None)
        if "el" in entry:
            entry["el"] = []

    def on_timer(self, at: int, ctx: Context) -> None:
        state = ctx.value(stored.STATE_NAME)
        table: dict[int, stored.Entry] | None = state.get()
        if not table:
            return
        processing = self.timer_kind == PROCESSING
        wm = ctx.watermark
        for end, entry in sorted(table.items()):
            tctx = _TriggerContext(self, ctx, entry, wm)
            if processing:
                decision = self._trigger.on_processing_time(at, self._max_ts(end), tctx)
            else:
                decision = self._trigger.on_event_time(at, self._max_ts(end), tctx)
            if decision.fire:
                self._emit(ctx, entry, decision.purge, wm)
            elif decision.purge:
                self._clear_contents(entry)
            if self._is_cleanup(at, end, processing):
                del table[end]
                self._clean_up(ctx, entry)
        state.set(table or None)

    def _is_cleanup(self, at: int, end: int, processing: bool) -> bool:
        if self._global:
            return False
        if self._event:
            return not processing and at == cleanup_time(end, self._lateness)
        return processing and at == end - 1

    def _clean_up(self, ctx: Context, entry: stored.Entry) -> None:
        """Flink clears a window's state at its cleanup time. Here a window emitted with
        ``final: false`` is emitted a last time, final (weir's contract for every window: its
        current contents, or what it last fired with if they were purged), and what it last
        held moves to the key's closed windows, so it still answers queries."""
        slots, _, _ = stored.contents(self.plan, self._evictor, entry)
        if slots is None:
            slots = entry.get("pending", (entry.get("last") or [None] * 3)[2])
        start, end = int(entry["s"]), int(entry["e"])
        if entry.get("pending") is not None and slots is not None:
            ctx.emit(self.plan.result(ctx.key, start, end, slots, True))
        if slots is None:
            return
        closed_state = ctx.value(stored.CLOSED_NAME)
        closed: dict[int, list[Any]] = closed_state.get() or {}
        # closed windows stay for the query retention, counted from the data watermark as
        # for every window; the key's state is read and written whole, so it must not grow
        # with the key's history; they close in time order, so the oldest come first
        horizon = self.data_watermark - self.retention_ms
        while closed:
            oldest = next(iter(closed))
            if cleanup_time(oldest, self._lateness) >= horizon:
                break
            del closed[oldest]
            self.dropped += 1
        closed[end] = [start, end, slots, True]
        closed_state.set(closed)


class TriggeredRuntime:
    """The ``OperatorRuntime`` of a triggered window operator: the window logic over a process
    runtime's keyed state and timers. ``clock`` is its processing time (injectable)."""

    def __init__(
        self,
        op: WindowNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
        clock: Clock = wall_clock,
    ) -> None:
        self.op = op
        self._fn = _WindowFunction(op, late, dead, clock, retention_ms)
        inner = ProcessNode(op.name, op.key, self._fn)
        self._rt = ProcessRuntime(
            inner, state, key_groups, max_parallelism, late, dead, retention_ms
        )
        trigger = op.trigger or triggers.event_time()
        self.processing_time = op.assigner.time == "processing" or triggers.uses_processing_time(
            trigger
        )
        # the highest watermark ``process`` fired at before a record arrived under it: ``advance``
        # fires only the trace's points past it (firing one again would give a timer a record
        # registered since, in the past, a watermark older than the one it arrived under)
        self._passed = MIN_WATERMARK

    @property
    def clock(self) -> Clock:
        return self._fn.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._fn.clock = clock

    @property
    def watermark(self) -> int:
        return self._rt.watermark

    @property
    def data_watermark(self) -> int:
        return self._rt.data_watermark

    @property
    def records_in(self) -> int:
        return self._rt.records_in

    @property
    def results_out(self) -> int:
        return self._rt.results_out

    @property
    def open_windows(self) -> int:
        return 0  # not counted: it would take a read of every key's state

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        """Event-time timers fire at each watermark of ``trace`` (the watermark after each
        record of the stream's batch, whichever worker it went to) before the first record
        that arrives under it, so a timer fires at the first watermark that reaches it, as if
        the watermark advanced after every record (what ``final`` and the firings depend on)."""
        rt = self._rt
        if not trace:
            rt.process(keys, recs, ts, wms)
            return
        j, n = 0, len(trace)
        for i, w in enumerate(wms):
            while j < n and trace[j] <= w:
                rt._fire(EVENT, trace[j])
                j += 1
            rt.process(keys[i : i + 1], recs[i : i + 1], ts[i : i + 1], wms[i : i + 1])
            # a timer the record registered at or below the watermark it arrived under (a
            # continuous trigger's first firing, already passed) is due at once, at that
            # watermark: the stream's watermark after the record, unless the record raised it,
            # and a record that raises the watermark registers no timer below it (weir's
            # triggers set theirs at or past the record's time; a user's trigger that sets one
            # further back sees it fire at the watermark the record arrived under). The trace's
            # next point may be far later (where this worker's next record arrives): there the
            # timer would pass the window's end in the same jump and fire once, not twice
            rt._fire(EVENT, w)
        if j:
            self._passed = max(self._passed, trace[j - 1])

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        rt = self._rt
        rt.data_watermark = max(rt.data_watermark, data_watermark)
        rt.watermark = max(rt.watermark, watermark)
        self._fn.data_watermark = rt.data_watermark
        for point in trace or ():  # as in ``process``: each timer at the first that reaches it
            if self._passed < point <= rt.watermark:
                rt._fire(EVENT, point)
        rt._fire(EVENT, rt.watermark)
        clock = self._fn.clock
        if watermark == MAX_WATERMARK:
            # the end of the input is the end of processing time too: every processing-time
            # timer fires once, and a continuous trigger sees the clock at its end (else it
            # would schedule one firing after another up to the end of time)
            self._fn.clock = _end_of_time
        self._fn.timer_kind = PROCESSING
        try:
            rt._fire(PROCESSING, self._fn.clock())
        finally:
            self._fn.timer_kind = EVENT
            self._fn.clock = clock

    def drain(self) -> list[Any]:
        return self._rt.drain()

    def drain_side(self) -> dict[str, list[Any]]:
        return {}

    def flush(self) -> None:
        self._rt.flush()

    def snapshot(self, barrier: bool = True) -> StateDelta:
        return self._rt.snapshot(barrier)

    def purge(self, force: bool = False) -> int:
        dropped, self._fn.dropped = self._fn.dropped, 0
        return self._rt.purge(force) + dropped

    def restore(self, watermark: int, data_watermark: int) -> None:
        self._rt.restore(watermark, data_watermark)
        self._fn.data_watermark = data_watermark

    def top_status(self) -> TopStatus | None:
        return None
