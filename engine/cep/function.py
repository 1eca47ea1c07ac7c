"""The pattern operator as a keyed process function (Flink's ``CepOperator``, event time), so
what it keeps is keyed state: checkpointed with the job, rescaled by key groups, and
queryable at ``/{job}/{name}/state/{key}``.

Per key it keeps three value states:

- ``queue``: the events the watermark has not passed yet, ``[timestamp, event]`` sorted by
  time (arrival order within a timestamp);
- ``nfa``: the NFA's runs and shared buffer (``matcher.KeyState``'s stored form);
- ``partial_matches``: what a query wants to know, ``{"count", "waiting_in", "queued",
  "oldest_start"}``: how many partial matches the key has, the pattern each waits in
  (oldest match first), how many events wait for the watermark, and when the oldest
  partial match began.

An event at ``t`` is queued and a timer set at ``t``; when the watermark reaches it, every
queued event up to the watermark goes through the NFA in time order, then time advances to the
watermark, which times out the partial matches older than ``within`` (a timer is set at the
oldest's timeout too). An event at or before the watermark it arrives under is late, as in
Flink's ``CepOperator``: it goes to the ``late`` side output (``LATE``) and matches nothing.
Timed-out partial matches go to the ``timed-out`` side output (``TIMED_OUT``).

Two figures per operator go to ``/metrics`` (``weir_cep_partial_matches``,
``weir_cep_timed_out_total``): the partial matches its keys hold, kept as each key's count
changes and rebuilt from the ``partial_matches`` states on restore, and the partial matches
that timed out in this run.

A condition that raises on an event: the event is left out (the NFA goes back to the state
before it and takes the events after it), and once the key's state is saved the timer fails
with the reasons, which sends them to the dead letters with the key.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any, Protocol

from weir.engine.cep.compiler import compile_pattern
from weir.engine.cep.matcher import KeyState, Matcher, Output
from weir.engine.cep.pattern import Pattern
from weir.engine.nodes import OutputTag

LATE = OutputTag("late")
TIMED_OUT = OutputTag("timed-out")

Match = dict[str, list[Any]]


class _ValueState(Protocol):
    def get(self, default: Any = None) -> Any: ...

    def set(self, value: Any) -> None: ...

    def clear(self) -> None: ...


class KeyedContext(Protocol):
    """The part of a keyed process function's context the pattern operator uses."""

    key: str
    timestamp: int | None
    watermark: int

    def value(self, name: str) -> _ValueState: ...

    def register_event_time_timer(self, timestamp: int) -> None: ...

    def emit(self, record: Any) -> None: ...

    def output(self, tag: OutputTag, record: Any) -> None: ...

    def add_to_metric(self, name: str, delta: int) -> None: ...


PARTIAL_MATCHES = "partial_matches"  # the gauge's name, and the state it is rebuilt from
TIMED_OUT_METRIC = "timed_out"


class MatchContext:
    """What ``process(fn)`` sees with each match (Flink's ``PatternProcessFunction.Context``):
    the key, the match's time, ``emit`` and ``output`` to a side output."""

    __slots__ = ("_ctx", "timestamp")

    def __init__(self, ctx: KeyedContext, timestamp: int) -> None:
        self._ctx = ctx
        self.timestamp = timestamp

    @property
    def key(self) -> str:
        """The key whose events made the match."""
        return self._ctx.key

    def emit(self, record: Any) -> None:
        """Emit ``record`` downstream (the operator's main output)."""
        self._ctx.emit(record)

    def output(self, tag: OutputTag, record: Any) -> None:
        """Emit ``record`` to the side output ``tag``."""
        self._ctx.output(tag, record)


MatchFn = Callable[[Match, MatchContext], None]


def default_match(match: Match, ctx: MatchContext) -> None:
    """With no function: ``{"key", "match", "ts"}``, ``match`` the events by pattern name."""
    ctx.emit({"key": ctx.key, "match": match, "ts": ctx.timestamp})


class PatternFunction:
    """Runs a pattern over each key's events; ``fn(match, ctx)`` handles each match."""

    def __init__(self, pattern: Pattern, fn: MatchFn | None = None) -> None:
        self.pattern = pattern
        self.matcher = Matcher(compile_pattern(pattern))
        self._fn: MatchFn = fn or default_match

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows: the pattern's steps, its skip strategy and window."""
        compiled = self.matcher.nfa
        return {
            "pattern": self.pattern.describe(),
            "skip": compiled.skip.describe(),
            "within_ms": compiled.window_ms or None,
        }

    def metrics_from_state(self, values: Callable[[str], list[Any]]) -> dict[str, int]:
        """The partial-matches gauge of a worker's keys after a restore, from each key's
        ``partial_matches`` summary (``values(name)``: every key's value of a state)."""
        held = values(PARTIAL_MATCHES)
        return {PARTIAL_MATCHES: sum(v.get("count", 0) for v in held if isinstance(v, dict))}

    def process(self, event: Any, ctx: KeyedContext) -> None:
        """Queue ``event`` in its key's state until the watermark passes it (a late one goes to
        the ``late`` side output); a timer at its time runs it through the NFA."""
        t = ctx.timestamp
        if t is None:
            raise ValueError("a pattern's event needs an event-time timestamp")
        if t <= ctx.watermark:
            record = {"key": ctx.key, "ts": t, "watermark": ctx.watermark, "record": event}
            ctx.output(LATE, record)
            return
        queue_state = ctx.value("queue")
        queue: list[list[Any]] = queue_state.get() or []
        queue.insert(bisect_right(queue, t, key=_first), [t, event])
        queue_state.set(queue)
        ctx.register_event_time_timer(t)
        self._summarise(ctx, None, len(queue))

    def on_timer(self, timestamp: int, ctx: KeyedContext) -> None:
        """Run the key's queued events up to the watermark through the NFA in time order; emit
        the matches, send partial matches past ``within`` to ``timed-out``."""
        watermark = ctx.watermark
        queue_state, nfa_state = ctx.value("queue"), ctx.value("nfa")
        queue: list[list[Any]] = queue_state.get() or []
        n = bisect_right(queue, watermark, key=_first)
        due, rest = queue[:n], queue[n:]
        stored = nfa_state.get()
        state = self.matcher.new_state() if stored is None else KeyState.from_stored(stored)
        out, failures = self._run(state, stored, due, watermark)
        if rest:
            queue_state.set(rest)
            ctx.register_event_time_timer(rest[0][0])
        else:
            queue_state.clear()
        if state.is_idle():
            nfa_state.clear()
        else:
            nfa_state.set(state.to_stored())
            due_at = self.matcher.next_timeout(state)
            if due_at is not None:
                ctx.register_event_time_timer(due_at)
        self._summarise(ctx, state, len(rest))
        timed_out = 0
        for found in out:
            if found.kind == "match":
                self._fn(found.match, MatchContext(ctx, found.ts))
            else:
                timed_out += 1
                ctx.output(TIMED_OUT, {"key": ctx.key, "match": found.match, "ts": found.ts})
        if timed_out:
            ctx.add_to_metric(TIMED_OUT_METRIC, timed_out)
        if failures:
            raise ValueError("; ".join(failures))

    def _run(
        self, state: KeyState, stored: Any, due: list[list[Any]], watermark: int
    ) -> tuple[list[Output], list[str]]:
        """The outputs of ``due`` and the reasons of the events a condition failed on. An
        event that fails is replayed around: the state goes back to what it was before the
        batch and the batch runs again without it (rare: a condition that raises)."""
        failures: list[str] = []
        events = [(t, e) for t, e in due]
        while True:
            try:
                return self.matcher.run(state, events, watermark), failures
            except Exception as exc:  # noqa: BLE001 - a bad event never stops the key
                bad = _failing(self.matcher, stored, events)
                failures.append(f"{type(exc).__name__}: {exc} (event {events[bad][1]!r})")
                del events[bad]
                fresh = self.matcher.new_state() if stored is None else KeyState.from_stored(stored)
                state.nfa, state.buffer = fresh.nfa, fresh.buffer

    def _summarise(self, ctx: KeyedContext, state: KeyState | None, queued: int) -> None:
        summary = ctx.value(PARTIAL_MATCHES)
        old = summary.get() or {}
        if state is None:  # an event queued: the NFA did not move
            count = old.get("count", 0)
            waiting, oldest = old.get("waiting_in", []), old.get("oldest_start")
        else:
            count, waiting = state.partial_matches, state.waiting_in()
            starts = [r.start_ts for r in state.nfa.partial if r.start_event is not None]
            oldest = min(starts) if starts else None
        if count != old.get("count", 0):
            ctx.add_to_metric(PARTIAL_MATCHES, count - old.get("count", 0))
        if count == 0 and queued == 0:
            summary.clear()
            return
        summary.set(
            {"count": count, "waiting_in": waiting, "queued": queued, "oldest_start": oldest}
        )


def _failing(matcher: Matcher, stored: Any, events: list[tuple[int, Any]]) -> int:
    """The index of the first event the batch fails on, found by running it again one event
    at a time from the stored state."""
    state = matcher.new_state() if stored is None else KeyState.from_stored(stored)
    for i, (t, event) in enumerate(events):
        try:
            matcher.run(state, [(t, event)], t)
        except Exception:  # noqa: BLE001 - this is the search for it
            return i
    return len(events) - 1  # only the final advance failed: blame the last event


def _first(entry: list[Any]) -> Any:
    return entry[0]
