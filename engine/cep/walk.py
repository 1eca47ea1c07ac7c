"""The compiler's walk over a pattern sequence (``compiler.py``): where it is (the current
pattern, the group it is in), the conditions that follow from that (Flink's
``getTakeCondition``, ``getIgnoreCondition``, ...), and how it makes states (unique names, the
windows between events of the states that take events, STOP states, copies).
"""

from __future__ import annotations

from weir.engine.cep.conditions import Test, always, both, negate
from weir.engine.cep.pattern import GroupPattern, Pattern
from weir.engine.cep.quantifier import ConsumingStrategy, Property
from weir.engine.cep.states import STATE_NAME_DELIM, State, StateType


class Walk:
    """Where the compiler's walk is (the current pattern, the group it is in, whether a
    group's loop is at its first pass), the conditions that follow from it, and the states it
    has made (``compiler._Compiler`` sets these up)."""

    current: Pattern
    group: GroupPattern | None
    first_of_loop: dict[int, bool]
    used: set[str]
    states: list[State]
    stop_states: dict[str, State]
    window_times: dict[str, int]

    def _set_first_of_loop(self, first: bool) -> None:
        if isinstance(self.current, GroupPattern):
            self.first_of_loop[id(self.current)] = first

    def _first_of_loop(self) -> bool:
        return self.first_of_loop.get(id(self.group), True)

    def _head_of_group(self, p: Pattern) -> bool:
        return self.group is not None and p.previous is None

    def _head_of_optional_group(self, p: Pattern) -> bool:
        return (
            self._head_of_group(p)
            and self._first_of_loop()
            and self.group is not None
            and self.group.quantifier.has(Property.OPTIONAL)
        )

    def _group_until(self) -> Test | None:
        return None if self.group is None else self.group.until_condition

    def _take_condition(self, p: Pattern) -> Test:
        taken = with_until(p.condition, self._group_until(), take=True)
        assert taken is not None
        return taken

    def _true(self) -> Test:
        found = with_until(always, self._group_until(), take=True)
        assert found is not None
        return found

    def _inner_ignore_condition(self, p: Pattern) -> Test | None:
        strategy = p.quantifier.inner
        if self._head_of_group(p) and self.group is not None:
            strategy = self.group.quantifier.inner
        return with_until(ignore_for(strategy, p), self._group_until(), take=False)

    def _ignore_condition(self, p: Pattern) -> Test | None:
        strategy = p.quantifier.strategy
        if self._head_of_group(p) and self.group is not None:
            q = self.group.quantifier
            strategy = q.strategy if self._first_of_loop() else q.inner
        return with_until(ignore_for(strategy, p), self._group_until(), take=False)

    # -- states -----------------------------------------------------------------------------------

    def _state(self, name: str, kind: StateType) -> State:
        """A state with a name unique among the NFA's (``name``, ``name:0``, ``name:1``, ...)."""
        candidate, n = name, 0
        while candidate in self.used:
            candidate = f"{name}{STATE_NAME_DELIM}{n}"
            n += 1
        self.used.add(candidate)
        state = State(candidate, kind)
        self.states.append(state)
        return state

    def _take_state(self, kind: StateType) -> State:
        """A state of the current pattern that takes events, with its window from the previous
        event if it has one (Flink's ``createState(type, isTake=true)``: a single pattern's
        ``PREVIOUS_AND_CURRENT`` window; a times or looping pattern's ``window_ms`` on its
        states but the first one named)."""
        current = self.current
        state = self._state(current.name, kind)
        window = None
        if current.count is None:
            window = current.previous_window_ms
        elif STATE_NAME_DELIM in state.name:
            window = current.count.window_ms
        if window:
            self.window_times[state.name] = window
        return state

    def _stop_state(self, condition: Test, name: str) -> State:
        stop = self.stop_states.get(name)
        if stop is None:
            stop = self.stop_states[name] = self._state(name, StateType.STOP)
            stop.add_take(condition)
        return stop

    def _copy(self, state: State) -> State:
        copy = self._state(state.original_name, state.kind)
        for t in state.transitions:
            copy.add(t.action, copy if t.target is t.source else t.target, t.condition)
        return copy


def ignore_for(strategy: ConsumingStrategy, p: Pattern) -> Test | None:
    if strategy is ConsumingStrategy.SKIP_TILL_NEXT:
        return negate(p.condition)
    if strategy is ConsumingStrategy.SKIP_TILL_ANY:
        return always
    return None  # strict: no event may be skipped


def with_until(condition: Test | None, until: Test | None, *, take: bool) -> Test | None:
    if until is not None and condition is not None:
        return both(negate(until), condition)
    if until is not None and take:
        return negate(until)
    return condition


def narrow_greedy(state: State, take: Test) -> None:
    """A greedy pattern's sink may leave only on events the loop would not take."""
    for t in state.transitions:
        t.condition = both(t.condition, negate(take))


def every_pattern(pattern: Pattern) -> list[Pattern]:
    found: list[Pattern] = []
    for p in pattern.sequence():
        found.append(p)
        if isinstance(p, GroupPattern):
            found += every_pattern(p.inner)
    return found
