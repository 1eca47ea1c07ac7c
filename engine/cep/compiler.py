"""Compiles a pattern sequence to the NFA's states, the way Flink's ``NFACompiler`` does, walking
the sequence backwards from the final state:

- a single pattern is one state: ``TAKE`` its condition to the next, ``IGNORE`` the events its
  contiguity lets it skip (none for ``next``, the non-matching ones for ``followed_by``, any
  for ``followed_by_any``), ``PROCEED`` past it when optional;
- ``times(n, m)`` is a chain of ``m`` such states, the last ``m - n`` with a ``PROCEED`` out;
- a looping pattern is a state that ``TAKE``s into itself and ``PROCEED``s to the next, behind
  the ``n - 1`` states of ``times_or_more(n)``; greedy narrows the next state's edges to events
  the loop would not take;
- ``not_next`` and ``not_followed_by`` become conditions on the surrounding states' edges that
  lead to a ``STOP`` state (which discards the branch); a ``not_followed_by`` at the end becomes
  a ``PENDING`` state, a match once its window passes without the event;
- a group pattern is its inner sequence compiled in place, looped for its quantifier.

The NFA (``nfa.py``) follows the edges in the order added here, which fixes the Dewey numbers
of the branches and so which events a match extracts.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.base.errors import MalformedPatternError
from weir.engine.cep.conditions import Test, both, negate
from weir.engine.cep.pattern import RESERVED, GroupPattern, Pattern
from weir.engine.cep.quantifier import ConsumingStrategy, Property, Times
from weir.engine.cep.skip import AfterMatchSkipStrategy, check_names
from weir.engine.cep.states import Action, State, StateType
from weir.engine.cep.walk import Walk, every_pattern, narrow_greedy, with_until


@dataclass(frozen=True, slots=True)
class Compiled:
    """A pattern's NFA: its states by name, the window (0: none), the skip strategy, and the
    windows from a partial match's previous event by state name (Flink's ``windowTimes``:
    ``within(ms, WithinType.PREVIOUS_AND_CURRENT)`` and ``times(..., window_ms=)``)."""

    states: dict[str, State]
    window_ms: int
    skip: AfterMatchSkipStrategy
    window_times: dict[str, int]

    @property
    def start(self) -> State:
        return next(s for s in self.states.values() if s.is_start)


def compile_pattern(pattern: Pattern) -> Compiled:
    """The NFA of the sequence ending in ``pattern``.

    Raises:
        MalformedPatternError: names used twice, a skip strategy naming no pattern, a
            ``not_followed_by`` at the end without ``within``, a pattern that is only NOT.
    """
    if not isinstance(pattern, Pattern):
        raise MalformedPatternError(f"{pattern!r} is not a Pattern; build one with Pattern.begin")
    return _Compiler(pattern).compile()


def can_produce_empty_matches(pattern: Pattern) -> bool:
    """Can the pattern match no event at all (``a*``, ``a? b?``)? A ``PROCEED`` path from the
    start state to the final one."""
    start = compile_pattern(pattern).start
    seen: set[str] = set()
    todo = [start]
    while todo:
        state = todo.pop()
        if state.name in seen:
            continue
        seen.add(state.name)
        for t in state.transitions:
            if t.action is Action.PROCEED:
                if t.target.is_final:
                    return True
                todo.append(t.target)
    return False


class _Compiler(Walk):
    def __init__(self, pattern: Pattern) -> None:
        self.used: set[str] = set()
        self.stop_states: dict[str, State] = {}
        self.states: list[State] = []
        self.current: Pattern = pattern
        self.following: Pattern | None = None
        self.group: GroupPattern | None = None
        self.first_of_loop: dict[int, bool] = {}
        self.original_state: dict[str, State] = {}
        self.last = pattern
        windows = [p.window_ms for p in every_pattern(pattern) if p.window_ms is not None]
        self.window_ms = min(windows, default=0)
        self.window_times: dict[str, int] = {}

    def compile(self) -> Compiled:
        self._check_names()
        sink = self._state(RESERVED, StateType.FINAL)
        sink = self._middle_states(sink)
        start = self._convert(sink)
        start.kind = StateType.START
        last = self.last
        if last.quantifier.strategy is ConsumingStrategy.NOT_FOLLOW and not (
            self.window_ms or last.previous_window_ms
        ):
            raise MalformedPatternError(
                f"not_followed_by({last.name!r}) ends the pattern without a window: give "
                "the pattern within(ms), or follow the NOT pattern with another"
            )
        wider = [ms for ms in self.window_times.values() if ms > self.window_ms > 0]
        if wider:
            raise MalformedPatternError(
                f"a window between events of {max(wider)} ms is wider than the pattern's "
                f"within({self.window_ms}); make it at most {self.window_ms}"
            )
        states = {s.name: s for s in self.states}
        return Compiled(states, self.window_ms, last.skip, self.window_times)

    def _check_names(self) -> None:
        names = self.last.names()
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise MalformedPatternError(
                    f"pattern name {name!r} is used twice; name each pattern once"
                )
            seen.add(name)
        if self.last.sequence()[0].quantifier.strategy in (
            ConsumingStrategy.NOT_FOLLOW,
            ConsumingStrategy.NOT_NEXT,
        ):
            raise MalformedPatternError("a pattern sequence cannot begin with a NOT pattern")
        check_names(self.last.skip, names)

    # -- the sequence ----------------------------------------------------------------------------

    def _middle_states(self, sink: State) -> State:
        last = sink
        while self.current.previous is not None:
            strategy = self.current.quantifier.strategy
            if strategy is ConsumingStrategy.NOT_FOLLOW:
                windowed = self.window_ms or self.current.previous_window_ms
                if windowed and last.is_final:
                    last = self._pending_not_followed(last)
            elif strategy is ConsumingStrategy.NOT_NEXT:
                last = self._not_next(last)
            else:
                last = self._convert(last)
            self.following = self.current
            self.current = self.current.previous
        return last

    def _pending_not_followed(self, last: State) -> State:
        pending = self._take_state(StateType.PENDING)
        condition = self._take_condition(self.current)
        pending.add_proceed(self._stop_state(condition, self.current.name), condition)
        pending.add_ignore(negate(condition))
        return pending

    def _not_next(self, last: State) -> State:
        state = self._take_state(StateType.NORMAL)
        condition = self._take_condition(self.current)
        stop = self._stop_state(condition, self.current.name)
        if last.is_final:  # never PROCEED into the final state: the next event decides
            state.add_ignore(negate(condition), last)
        else:
            state.add_proceed(last, negate(condition))
        state.add_proceed(stop, condition)
        return state

    def _convert(self, sink: State) -> State:
        quantifier = self.current.quantifier
        times = self.current.count or Times(1, 1)
        if quantifier.has(Property.LOOPING):
            self._set_first_of_loop(False)
            looping = self._looping(self._without_transitive_nots(sink))
            self._set_first_of_loop(True)
            last = self._times_state(looping, sink, times)
        elif quantifier.has(Property.TIMES):
            last = self._times_state(sink, sink, times)
        else:
            last = self._singleton(
                sink,
                sink,
                self._take_condition(self.current),
                self._ignore_condition(self.current),
                self.current.quantifier.has(Property.OPTIONAL),
            )
        self._add_stop_states(last)
        return last

    # -- NOT patterns ----------------------------------------------------------------------------

    def _current_not_conditions(self) -> list[tuple[Test, str]]:
        """The NOT conditions that apply to the current pattern's states: a
        ``not_followed_by`` before it, directly or past optional patterns."""
        found: list[tuple[Test, str]] = []
        p = self.current
        while p.previous is not None and (
            p.previous.quantifier.has(Property.OPTIONAL)
            or p.previous.quantifier.strategy is ConsumingStrategy.NOT_FOLLOW
        ):
            p = p.previous
            if p.quantifier.strategy is ConsumingStrategy.NOT_FOLLOW:
                found.append((self._take_condition(p), p.name))
        return found

    def _add_stop_states(self, state: State) -> None:
        for condition, name in self._current_not_conditions():
            state.add_proceed(self._stop_state(condition, name), condition)

    def _add_stop_state_to_looping(self, state: State) -> None:
        following = self.following
        if following is not None and following.quantifier.strategy is ConsumingStrategy.NOT_FOLLOW:
            condition = self._take_condition(following)
            state.add_proceed(self._stop_state(condition, following.name), condition)

    def _without_transitive_nots(self, sink: State) -> State:
        """``sink`` without its edges to the STOP states of NOT patterns an optional current
        pattern skips past: once it takes an event, those no longer apply."""
        nots = self._current_not_conditions()
        if not nots or not self.current.quantifier.has(Property.OPTIONAL):
            return sink
        copy = self._state(sink.name, sink.kind)
        for t in sink.transitions:
            if t.action is Action.PROCEED:
                target = t.target
                if target.is_stop:
                    if any(target.name == name for _, name in nots):
                        continue
                else:
                    target = self._without_transitive_nots(target)
                copy.add(Action.PROCEED, target, t.condition)
            else:
                copy.add(t.action, copy if t.target is t.source else t.target, t.condition)
        return copy

    # -- quantified patterns ---------------------------------------------------------------------

    def _times_state(self, sink: State, proceed: State, times: Times) -> State:
        last = sink
        self._set_first_of_loop(False)
        until = self.current.until_condition
        inner_ignore = with_until(self._inner_ignore_condition(self.current), until, take=False)
        take = with_until(self._take_condition(self.current), until, take=True)
        assert take is not None  # a take condition stays one
        if self.current.quantifier.has(Property.GREEDY) and times.low != times.high:
            if until is not None:
                self.original_state[sink.name] = self._copy(sink)
            narrow_greedy(sink, take)
        for _ in range(times.low, times.high):
            last = self._singleton(last, proceed, take, inner_ignore, True)
            self._add_stop_state_to_looping(last)
        for _ in range(times.low - 1):
            last = self._singleton(last, None, take, inner_ignore, False)
            self._add_stop_state_to_looping(last)
        self._set_first_of_loop(True)
        optional = self.current.quantifier.has(Property.OPTIONAL)
        return self._singleton(last, proceed, take, self._ignore_condition(self.current), optional)

    def _singleton(
        self,
        sink: State,
        proceed: State | None,
        take: Test,
        ignore: Test | None,
        optional: bool,
    ) -> State:
        current = self.current
        if isinstance(current, GroupPattern):
            return self._group_state(current, sink, proceed, optional)
        single = self._take_state(StateType.NORMAL)
        target = self._without_transitive_nots(sink)
        single.add_take(take, target)
        if optional and proceed is not None:
            self._add_optional_proceed(single, proceed)
        if ignore is not None:
            ignore_state = single
            if optional or self._head_of_optional_group(current):
                ignore_state = self._state(current.name, StateType.NORMAL)
                ignore_state.add_take(take, target)
                ignore_state.add_ignore(ignore)
                self._add_stop_states(ignore_state)
            single.add_ignore(ignore, ignore_state)
        return single

    def _add_optional_proceed(self, single: State, proceed: State) -> None:
        condition = self._true()
        until = self.current.until_condition
        if self.current.quantifier.has(Property.GREEDY) and until is not None:
            copy = self.original_state.get(proceed.name, proceed)
            single.add_proceed(copy, both(condition, until))
            single.add_proceed(proceed, both(condition, negate(until)))
        else:
            single.add_proceed(proceed, condition)

    def _looping(self, sink: State) -> State:
        current = self.current
        if isinstance(current, GroupPattern):
            return self._looping_group_state(current, sink)
        until = current.until_condition
        ignore = with_until(self._inner_ignore_condition(current), until, take=False)
        take = with_until(self._take_condition(current), until, take=True)
        assert take is not None
        proceed = self._true()
        looping = self._take_state(StateType.NORMAL)
        if current.quantifier.has(Property.GREEDY):
            if until is not None:
                copy = self._copy(sink)
                looping.add_proceed(copy, both(proceed, until))
                self.original_state[sink.name] = copy
            looping.add_proceed(sink, proceed if until is None else both(proceed, negate(until)))
            narrow_greedy(sink, self._take_condition(current))
        else:
            looping.add_proceed(sink, proceed)
        looping.add_take(take)
        self._add_stop_state_to_looping(looping)
        if ignore is not None:
            ignore_state = self._state(current.name, StateType.NORMAL)
            ignore_state.add_take(take, looping)
            ignore_state.add_ignore(ignore)
            looping.add_ignore(ignore, ignore_state)
            self._add_stop_state_to_looping(ignore_state)
        return looping

    # -- groups ----------------------------------------------------------------------------------

    def _group_state(
        self, group: GroupPattern, sink: State, proceed: State | None, optional: bool
    ) -> State:
        condition = self._true()
        saved = (self.current, self.following, self.group)
        self.group, self.current = group, group.inner
        last = self._convert(self._middle_states(sink))
        if optional and proceed is not None:
            last.add_proceed(proceed, condition)
        self.current, self.following, self.group = saved
        return last

    def _looping_group_state(self, group: GroupPattern, sink: State) -> State:
        condition = self._true()
        saved = (self.current, self.following, self.group)
        dummy = self._take_state(StateType.NORMAL)
        self.group, self.current = group, group.inner
        last = self._convert(self._middle_states(dummy))
        last.add_proceed(sink, condition)
        dummy.add_proceed(last, condition)
        self.current, self.following, self.group = saved
        return last
