"""The NFA that runs a compiled pattern over one key's events (Flink's ``NFA``).

``process`` feeds one event: every run (partial match) follows the edges whose conditions the
event satisfies (``TAKE``, ``IGNORE``, and ``PROCEED`` at once onwards), branching where
several do; a run that reaches the final state is a match, one that reaches a ``STOP`` state
(a NOT pattern's event) is dropped with its siblings; the start state stays, ready for a new
match. ``advance_time`` tells it no event before ``ts`` will come: runs older than the window
time out (a pending ``not_followed_by`` at the end becomes a match instead).

Matches are then emitted through the after-match skip strategy (``skip.py``). Events must come
in event-time order; the pattern operator sorts them (``matcher.py``).

What runs and the buffer hold is ``NFAState`` and ``SharedBuffer``, per key; the NFA itself is
the compiled states, shared by every key.
"""

from __future__ import annotations

from typing import Any

from weir.engine.cep.buffer import Match, SharedBuffer
from weir.engine.cep.compiler import Compiled
from weir.engine.cep.computation import Run, RunQueue, add_stage, increase, start_run
from weir.engine.cep.conditions import Test, always
from weir.engine.cep.skip import AfterMatchSkipStrategy, EventId, PathIds
from weir.engine.cep.states import Action, State, Transition


class NFAState:
    """A key's runs: the partial matches, and the completed matches a skip strategy holds back
    until no earlier partial match is alive."""

    __slots__ = ("completed", "partial")

    def __init__(self, partial: RunQueue, completed: RunQueue | None = None) -> None:
        self.partial = partial
        self.completed = RunQueue() if completed is None else completed


Timeout = tuple[Match, int]  # a timed-out partial match and the time it timed out


class _Event:
    """The event being processed; registered in the buffer the first time a run takes it."""

    __slots__ = ("buffer", "eid", "ts", "value")

    def __init__(self, value: Any, ts: int, buffer: SharedBuffer) -> None:
        self.value = value
        self.ts = ts
        self.buffer = buffer
        self.eid: EventId | None = None

    def id(self) -> EventId:
        if self.eid is None:
            self.eid = self.buffer.register(self.value, self.ts)
        return self.eid


class _Context:
    """What an iterative condition sees: the run's partial match, read once when asked."""

    __slots__ = ("_buffer", "_found", "_run", "timestamp")

    def __init__(self, buffer: SharedBuffer, run: Run, ts: int) -> None:
        self._buffer = buffer
        self._run = run
        self._found: Match | None = None
        self.timestamp = ts

    def events_of(self, name: str) -> list[Any]:
        if self._found is None:
            self._found = self._buffer.materialize(current_match(self._buffer, self._run))
        return list(self._found.get(name, ()))


def current_match(buffer: SharedBuffer, run: Run) -> PathIds:
    """The events a run holds, as event ids by pattern name."""
    if run.node is None:
        return {}
    paths = buffer.extract(run.node, run.version)
    return paths[0] if paths else {}


class NFA:
    """A compiled pattern's automaton."""

    def __init__(self, compiled: Compiled) -> None:
        self.states = compiled.states
        self.window_ms = compiled.window_ms
        self.window_times = compiled.window_times
        self.skip = compiled.skip
        self._start = compiled.start

    def initial_state(self) -> NFAState:
        return NFAState(RunQueue([start_run(self._start.name)]))

    def process(self, buffer: SharedBuffer, nfa: NFAState, value: Any, ts: int) -> list[Match]:
        """Feed one event; returns the matches it completes, in emission order."""
        event = _Event(value, ts, buffer)
        try:
            partial, potential = RunQueue(), RunQueue()
            for run in nfa.partial:
                retain: list[Run] = []
                discard = False
                for new in self._next_runs(buffer, run, event):
                    state = self.states[new.state]
                    if state.is_final:
                        potential.offer(new)
                    elif state.is_stop:
                        discard = True
                        buffer.release(new.node, new.version)
                    else:
                        retain.append(new)
                for kept in retain:
                    if discard:  # a NOT pattern's event ends the branch and its siblings
                        buffer.release(kept.node, kept.version)
                    else:
                        partial.offer(kept)
            return self._emit(buffer, nfa, potential, partial)
        finally:
            if event.eid is not None:
                buffer.release_event(event.eid)

    def advance_time(
        self, buffer: SharedBuffer, nfa: NFAState, ts: int
    ) -> tuple[list[Match], list[Timeout]]:
        """No event before ``ts`` will come: the runs whose window passed time out (returned
        with their timeout time, ``start + window`` or ``previous + window`` for a window
        from the previous event), pending ``not_followed_by`` runs match."""
        timeouts: list[Timeout] = []
        partial, potential = RunQueue(), RunQueue()
        for run in nfa.partial:
            at = self._timed_out(run, ts)
            if at is None:
                partial.offer(run)
            elif self.states[run.state].is_pending:
                potential.offer(run)
            else:
                match = buffer.materialize(current_match(buffer, run))
                timeouts.append((match, at))
                buffer.release(run.node, run.version)
        matches = self._emit(buffer, nfa, potential, partial)
        buffer.advance_time(ts)
        return matches, timeouts

    def _timed_out(self, run: Run, ts: int) -> int | None:
        """When ``run`` timed out, if it has by ``ts`` (Flink's ``isStateTimedOut``, the window
        from the previous event first); ``None``: it has not."""
        if run.start_event is None:
            return None
        previous = self.window_times.get(run.state, 0)
        if previous > 0 and ts - run.previous_ts >= previous:
            return run.previous_ts + previous
        if self.window_ms > 0 and ts - run.start_ts >= self.window_ms:
            return run.start_ts + self.window_ms
        return None

    def next_timeout(self, nfa: NFAState) -> int | None:
        """When the earliest run times out (``None``: no window, or no run to time out)."""
        if self.window_ms <= 0 and not self.window_times:
            return None
        due: list[int] = []
        for run in nfa.partial:
            if run.start_event is None:
                continue
            if self.window_ms > 0:
                due.append(run.start_ts + self.window_ms)
            previous = self.window_times.get(run.state, 0)
            if previous > 0:
                due.append(run.previous_ts + previous)
        return min(due, default=None)

    # -- matches ---------------------------------------------------------------------------------

    def _emit(
        self, buffer: SharedBuffer, nfa: NFAState, potential: RunQueue, partial: RunQueue
    ) -> list[Match]:
        """Completed matches in the order of their first events; with a skip strategy, only
        those no earlier partial match may still prune, each pruning what follows it."""
        skip = self.skip
        for run in potential:
            nfa.completed.offer(run)
        out: list[Match] = []
        while (earliest := nfa.completed.peek()) is not None:
            if skip.is_skip:
                first_partial = partial.peek()
                if first_partial is not None and earliest.priority > first_partial.priority:
                    break
            nfa.completed.poll()
            paths = buffer.extract(earliest.node, earliest.version) if earliest.node else []
            if paths:
                pruning = skip.pruning_id(paths)
                if pruning is not None:
                    _prune(skip, partial, pruning, buffer)
                    _prune(skip, nfa.completed, pruning, buffer)
                out.append(buffer.materialize(paths[0]))
            buffer.release(earliest.node, earliest.version)
        nfa.partial = partial
        return out

    # -- one run, one event ----------------------------------------------------------------------

    def _next_runs(self, buffer: SharedBuffer, run: Run, event: _Event) -> list[Run]:
        """The runs ``run`` becomes on ``event`` (Flink's ``computeNextStates``): the edges the
        event enables, each given a version that tells the branches apart."""
        ctx = _Context(buffer, run, event.ts)
        state = self.states[run.state]
        edges, takes, ignores = _decision_graph(state, ctx, event.value)
        take_left = max(0, takes - 1)
        ignore_left = ignores
        take_skip = max(0, takes - 1)
        out: list[Run] = []
        for edge in edges:
            if edge.action is Action.IGNORE:
                if state.is_start:
                    continue
                if edge.target.name == state.name:  # stays: a looping or singleton state
                    version = increase(run.version, _self_increase(ignores, takes))
                else:  # IGNORE after PROCEED
                    version = add_stage(increase(run.version, take_skip + ignore_left))
                    ignore_left -= 1
                out.append(_run(buffer, edge.target, run.node, version, run))
                continue
            version = increase(run.version, take_left)
            take_left -= 1
            eid = event.id()
            node = buffer.put(edge.source.original_name, eid, run.node, version)
            start_ts, start = (event.ts, eid) if state.is_start else (run.start_ts, run.start_event)
            taken = Run(edge.target.name, node, add_stage(version), start_ts, event.ts, start)
            buffer.lock(node, taken.version)
            out.append(taken)
            final = _final_after_proceed(edge.target, ctx, event.value)
            if final is not None:
                done = Run(final.name, node, taken.version, start_ts, event.ts, start)
                buffer.lock(node, done.version)
                out.append(done)
        if state.is_start:
            out.append(start_run(run.state, increase(run.version, _self_increase(ignores, takes))))
        if run.node is not None:
            buffer.release(run.node, run.version)
        return out


def _run(buffer: SharedBuffer, target: State, node: Any, version: Any, run: Run) -> Run:
    new = Run(target.name, node, version, run.start_ts, run.previous_ts, run.start_event)
    buffer.lock(node, version)
    return new


def _holds(condition: Test, event: Any, ctx: _Context) -> bool:
    return condition is always or condition(event, ctx)


def _decision_graph(state: State, ctx: _Context, event: Any) -> tuple[list[Transition], int, int]:
    """The ``TAKE`` and ``IGNORE`` edges the event enables from ``state``, following
    ``PROCEED`` edges, and how many of each branch off (an ``IGNORE`` back into ``state``
    itself does not)."""
    edges: list[Transition] = []
    takes = ignores = 0
    todo = [state]
    while todo:
        current = todo.pop()
        for t in current.transitions:
            if not _holds(t.condition, event, ctx):
                continue
            if t.action is Action.PROCEED:
                todo.append(t.target)
                continue
            if not (t.action is Action.IGNORE and t.target.name == state.name):
                if t.action is Action.IGNORE:
                    ignores += 1
                else:
                    takes += 1
            edges.append(t)
    return edges, takes, ignores


def _final_after_proceed(state: State, ctx: _Context, event: Any) -> State | None:
    """The final state, if ``state`` reaches it by ``PROCEED`` edges alone (the rest of the
    pattern is optional): the run is then a match already."""
    todo = [state]
    while todo:
        current = todo.pop()
        for t in current.transitions:
            if t.action is Action.PROCEED and _holds(t.condition, event, ctx):
                if t.target.is_final:
                    return t.target
                todo.append(t.target)
    return None


def _self_increase(ignores: int, takes: int) -> int:
    return 0 if takes == 0 and ignores == 0 else ignores + max(1, takes)


def _prune(
    skip: AfterMatchSkipStrategy, queue: RunQueue, pruning: EventId, buffer: SharedBuffer
) -> None:
    doomed = [r for r in queue if skip.prunes(r.start_event, pruning)]
    if doomed:
        for run in doomed:
            buffer.release(run.node, run.version)
        queue.remove_if(lambda r: r in doomed)
