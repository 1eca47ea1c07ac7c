"""The NFA's states and transitions (Flink's ``State``, ``StateTransition``): what the compiler
builds from a pattern and the NFA walks.

A transition is taken when its condition holds for the event: ``TAKE`` puts the event in the
match and moves to the target, ``IGNORE`` skips the event and stays (or moves, after a
``PROCEED``), ``PROCEED`` moves to the target without consuming the event (an epsilon move,
followed at once with the same event).
"""

from __future__ import annotations

from enum import Enum

from weir.engine.cep.conditions import Test

STATE_NAME_DELIM = ":"


class Action(Enum):
    TAKE = "take"
    IGNORE = "ignore"
    PROCEED = "proceed"


class StateType(Enum):
    START = "start"
    NORMAL = "normal"
    FINAL = "final"
    STOP = "stop"
    PENDING = "pending"  # a not_followed_by at the end: a match once its window passes


class Transition:
    """An edge; its condition may be narrowed later (a greedy pattern's sink)."""

    __slots__ = ("action", "condition", "source", "target")

    def __init__(self, source: State, action: Action, target: State, condition: Test) -> None:
        self.source = source
        self.action = action
        self.target = target
        self.condition = condition


class State:
    """A node of the NFA: a name (unique; ``original_name`` is the pattern's), a type and the
    edges leaving it, in the order the compiler added them (the NFA follows that order)."""

    __slots__ = ("kind", "name", "original_name", "transitions")

    def __init__(self, name: str, kind: StateType) -> None:
        self.name = name
        self.original_name = name.split(STATE_NAME_DELIM)[0]
        self.kind = kind
        self.transitions: list[Transition] = []

    def add(self, action: Action, target: State, condition: Test) -> None:
        self.transitions.append(Transition(self, action, target, condition))

    def add_take(self, condition: Test, target: State | None = None) -> None:
        self.add(Action.TAKE, self if target is None else target, condition)

    def add_ignore(self, condition: Test, target: State | None = None) -> None:
        self.add(Action.IGNORE, self if target is None else target, condition)

    def add_proceed(self, target: State, condition: Test) -> None:
        self.add(Action.PROCEED, target, condition)

    @property
    def is_start(self) -> bool:
        return self.kind is StateType.START

    @property
    def is_final(self) -> bool:
        return self.kind is StateType.FINAL

    @property
    def is_stop(self) -> bool:
        return self.kind is StateType.STOP

    @property
    def is_pending(self) -> bool:
        return self.kind is StateType.PENDING

    def __repr__(self) -> str:
        edges = ", ".join(f"{t.action.value}->{t.target.name}" for t in self.transitions)
        return f"State({self.name!r}, {self.kind.value}, [{edges}])"
