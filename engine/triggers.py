"""Triggers: when a window emits its current aggregate (fires) and when it forgets its contents
(purges), as Flink's ``Trigger`` classes decide it.

    .window(windows.global_windows()).trigger(triggers.purging(triggers.count(100)))

A trigger is a frozen value; what it remembers per window (a count, the next continuous firing)
lives in the window's own state, so it is checkpointed, restored and rescaled with the window.
Each method answers a ``Decision``: fire (emit) and purge (clear the contents).

- ``event_time()``: fires when the watermark passes the window's end (the default of event-time
  windows), and again for each record that arrives within allowed lateness.
- ``processing_time()``: fires when the clock passes the window's end (processing-time windows).
- ``count(n)``: fires every ``n`` records of the window.
- ``continuous_event_time(ms)`` / ``continuous_processing_time(ms)``: fire every ``ms`` of
  event / processing time while the window has contents, aligned to multiples of ``ms``.
- ``purging(t)``: as ``t``, purging whenever it fires (Flink's ``PurgingTrigger``).
- ``never()``: never fires (the default of global windows).

On merging (session) windows a trigger must merge (``can_merge``, Flink's ``Trigger.canMerge``):
``on_merge`` builds the merged window's trigger state from the merged windows' states (a count
sums, a continuous trigger keeps the earliest next firing) and registers its timers again for
the merged window, as Flink's ``onMerge`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from weir.engine.windows.base import MAX_TIME


@dataclass(frozen=True, slots=True)
class Decision:
    """What a trigger decides for its window: fire (emit the aggregate), purge (clear it)."""

    fire: bool = False
    purge: bool = False


CONTINUE = Decision()
FIRE = Decision(fire=True)
FIRE_AND_PURGE = Decision(fire=True, purge=True)


class TriggerContext(Protocol):
    """What a trigger sees of the operator: the times, timers, and its window's own state."""

    @property
    def watermark(self) -> int:
        """The operator's event-time watermark."""
        ...

    @property
    def now(self) -> int:
        """The operator's processing time (epoch ms; injectable in tests)."""
        ...

    @property
    def state(self) -> dict[str, Any]:
        """This trigger's state for the current window (checkpointed with it)."""
        ...

    def register_event_time_timer(self, at: int) -> None:
        """Call the trigger's ``on_event_time`` when the watermark reaches ``at``."""
        ...

    def register_processing_time_timer(self, at: int) -> None:
        """Call the trigger's ``on_processing_time`` when the clock reaches ``at``."""
        ...


def _check_interval(kind: str, ms: object) -> None:
    if type(ms) is not int or ms <= 0:
        raise ValueError(
            f"triggers.{kind}({ms!r}): the interval must be a positive integer of milliseconds, "
            f"e.g. triggers.{kind}(1_000)"
        )


def _earliest_next(ctx: TriggerContext, merged: list[dict[str, Any]]) -> int | None:
    """A continuous trigger's merged state: the earliest next firing of the merged windows
    (Flink merges it with ``Min``)."""
    nexts = [int(m["next"]) for m in merged if m.get("next") is not None]
    if not nexts:
        return None
    ctx.state["next"] = min(nexts)
    return min(nexts)


@dataclass(frozen=True, slots=True)
class EventTimeTrigger:
    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        if max_ts <= ctx.watermark:
            return FIRE  # a record within allowed lateness: fire the update at once
        ctx.register_event_time_timer(max_ts)
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return FIRE if at == max_ts else CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        if max_ts > ctx.watermark:
            ctx.register_event_time_timer(max_ts)

    def describe(self) -> str:
        return "event_time()"


@dataclass(frozen=True, slots=True)
class ProcessingTimeTrigger:
    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        ctx.register_processing_time_timer(max_ts)
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return FIRE if at == max_ts else CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        if max_ts > ctx.now:
            ctx.register_processing_time_timer(max_ts)

    def describe(self) -> str:
        return "processing_time()"


@dataclass(frozen=True, slots=True)
class CountTrigger:
    n: int

    def __post_init__(self) -> None:
        if type(self.n) is not int or self.n <= 0:
            raise ValueError(
                f"triggers.count({self.n!r}): the count must be a positive integer, "
                "e.g. triggers.count(100)"
            )

    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        seen = int(ctx.state.get("count", 0)) + 1
        if seen >= self.n:
            ctx.state.pop("count", None)
            return FIRE
        ctx.state["count"] = seen
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        # Flink sums the counts (``ReducingState`` merge); a merged count past ``n`` fires at
        # the window's next record, as Flink's does
        seen = sum(int(m.get("count", 0)) for m in merged)
        if seen:
            ctx.state["count"] = seen

    def describe(self) -> str:
        return f"count({self.n})"


def _next_firing(ctx: TriggerContext, interval: int, now: int, max_ts: int, event: bool) -> None:
    """A continuous trigger's next firing: the first multiple of ``interval`` after ``now``
    (the watermark, or the clock), at most the window's end. Flink adds one interval to the
    firing time instead, which fires once per interval the watermark jumps over (with the same
    contents each time) and, for a global window at the final watermark, once per interval up
    to the end of time; one firing per jump is what is meant."""
    nxt = min(now - now % interval + interval, max_ts)
    if nxt <= now:  # at the end of time: the window's own end fires it
        ctx.state.pop("next", None)
        return
    ctx.state["next"] = nxt
    if event:
        ctx.register_event_time_timer(nxt)
    else:
        ctx.register_processing_time_timer(nxt)


@dataclass(frozen=True, slots=True)
class ContinuousEventTimeTrigger:
    """Fires at every multiple of ``interval_ms`` the watermark passes while the window holds
    records, and at the window's end (Flink's ``ContinuousEventTimeTrigger``)."""

    interval_ms: int

    def __post_init__(self) -> None:
        _check_interval("continuous_event_time", self.interval_ms)

    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        if max_ts <= ctx.watermark:
            return FIRE
        ctx.register_event_time_timer(max_ts)
        if "next" not in ctx.state:
            nxt = min(t - t % self.interval_ms + self.interval_ms, max_ts, MAX_TIME)
            ctx.state["next"] = nxt
            ctx.register_event_time_timer(nxt)
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        if at == max_ts:
            return FIRE
        if ctx.state.get("next") == at:
            if max_ts <= ctx.watermark:
                # the watermark that reached this firing reached the window's end too, whose
                # own timer fires next: one firing per watermark jump (Flink fires twice, the
                # same contents each time), so a window is emitted once at the end of input at
                # every parallelism, and final once
                ctx.state.pop("next", None)
                return CONTINUE
            _next_firing(ctx, self.interval_ms, max(ctx.watermark, at), max_ts, event=True)
            return FIRE
        return CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        nxt = _earliest_next(ctx, merged)
        if nxt is not None:
            ctx.register_event_time_timer(nxt)
        if max_ts > ctx.watermark:
            ctx.register_event_time_timer(max_ts)

    def describe(self) -> str:
        return f"continuous_event_time({self.interval_ms})"


@dataclass(frozen=True, slots=True)
class ContinuousProcessingTimeTrigger:
    """Fires every ``interval_ms`` of processing time, aligned to multiples of it, once the
    window holds a record (Flink's ``ContinuousProcessingTimeTrigger``)."""

    interval_ms: int

    def __post_init__(self) -> None:
        _check_interval("continuous_processing_time", self.interval_ms)

    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        if "next" not in ctx.state:
            now = ctx.now
            nxt = min(now - now % self.interval_ms + self.interval_ms, max_ts)
            ctx.state["next"] = nxt
            ctx.register_processing_time_timer(nxt)
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        if ctx.state.get("next") == at:
            _next_firing(ctx, self.interval_ms, max(ctx.now, at), max_ts, event=False)
            return FIRE
        return CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        nxt = _earliest_next(ctx, merged)
        if nxt is not None:
            ctx.register_processing_time_timer(nxt)

    def describe(self) -> str:
        return f"continuous_processing_time({self.interval_ms})"


@dataclass(frozen=True, slots=True)
class NeverTrigger:
    can_merge: ClassVar[bool] = True

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return CONTINUE

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        return None

    def describe(self) -> str:
        return "never()"


Basic = (
    EventTimeTrigger
    | ProcessingTimeTrigger
    | CountTrigger
    | ContinuousEventTimeTrigger
    | ContinuousProcessingTimeTrigger
    | NeverTrigger
)


def _purge(d: Decision) -> Decision:
    return FIRE_AND_PURGE if d.fire else d


@dataclass(frozen=True, slots=True)
class PurgingTrigger:
    inner: Basic

    def __post_init__(self) -> None:
        if not isinstance(self.inner, Basic):
            raise ValueError(
                f"triggers.purging({self.inner!r}): pass a trigger to purge on, such as "
                "triggers.count(100) (a purging trigger purges already)"
            )

    @property
    def can_merge(self) -> bool:
        return can_merge(self.inner)

    def on_element(self, t: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return _purge(self.inner.on_element(t, max_ts, ctx))

    def on_event_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return _purge(self.inner.on_event_time(at, max_ts, ctx))

    def on_processing_time(self, at: int, max_ts: int, ctx: TriggerContext) -> Decision:
        return _purge(self.inner.on_processing_time(at, max_ts, ctx))

    def on_merge(self, max_ts: int, merged: list[dict[str, Any]], ctx: TriggerContext) -> None:
        self.inner.on_merge(max_ts, merged, ctx)

    def describe(self) -> str:
        return f"purging({self.inner.describe()})"


Trigger = Basic | PurgingTrigger


def can_merge(trigger: object) -> bool:
    """May it run on merging (session) windows? Flink's ``Trigger.canMerge``."""
    return getattr(trigger, "can_merge", False) is True


def uses_processing_time(trigger: Trigger) -> bool:
    """Whether ``trigger`` (or the one a ``purging`` trigger wraps) fires on the clock."""
    inner = trigger.inner if isinstance(trigger, PurgingTrigger) else trigger
    return isinstance(inner, ProcessingTimeTrigger | ContinuousProcessingTimeTrigger)


def event_time() -> EventTimeTrigger:
    """Fire when the watermark reaches the window's ``end - 1``, and again for each record
    within allowed lateness (the default of event-time windows; Flink's ``EventTimeTrigger``)."""
    return EventTimeTrigger()


def processing_time() -> ProcessingTimeTrigger:
    """Fire when the clock passes the window's end (the default of processing-time windows)."""
    return ProcessingTimeTrigger()


def count(n: int) -> CountTrigger:
    """Fire every ``n`` records of the window (Flink's ``CountTrigger``).

    Example:
        ``keyed.window(windows.global_windows()).trigger(triggers.count(10))``
    """
    return CountTrigger(n)


def continuous_event_time(interval_ms: int) -> ContinuousEventTimeTrigger:
    """Fire at each multiple of ``interval_ms`` of event time while the window holds records,
    and at its end: early results of a long window.

    Raises:
        ValueError: ``interval_ms`` is not a positive integer.
    """
    return ContinuousEventTimeTrigger(interval_ms)


def continuous_processing_time(interval_ms: int) -> ContinuousProcessingTimeTrigger:
    """Fire at each multiple of ``interval_ms`` of the clock while the window holds records.

    Raises:
        ValueError: ``interval_ms`` is not a positive integer.
    """
    return ContinuousProcessingTimeTrigger(interval_ms)


def purging(trigger: Basic) -> PurgingTrigger:
    """Fire when ``trigger`` fires, and clear the window each time (Flink's ``PurgingTrigger``)."""
    return PurgingTrigger(trigger)


def never() -> NeverTrigger:
    """Never fire (the default of global windows, which need a trigger to emit anything)."""
    return NeverTrigger()


__all__ = [
    "Decision",
    "Trigger",
    "TriggerContext",
    "can_merge",
    "continuous_event_time",
    "continuous_processing_time",
    "count",
    "event_time",
    "never",
    "processing_time",
    "purging",
    "uses_processing_time",
]
