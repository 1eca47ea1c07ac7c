"""One key's pattern state and how time moves it (Flink's ``CepOperator`` logic, per key).

The pattern function (``function.py``) buffers a key's events until the watermark passes them,
then hands them here in event-time order (arrival order within one timestamp): a match never
depends on how events arrived, only on their times. Before each timestamp's events, and at the
watermark itself, time advances: runs older than the window time out.

``KeyState`` is what a key keeps besides that queue (runs, shared buffer) and its stored form,
plain lists that msgpack holds; ``Matcher`` is the compiled pattern shared by every key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from weir.engine.cep.buffer import Match, SharedBuffer
from weir.engine.cep.compiler import Compiled
from weir.engine.cep.computation import Run, RunQueue
from weir.engine.cep.nfa import NFA, NFAState

STORED_VERSION = 1


@dataclass(frozen=True, slots=True)
class Output:
    """A match (``kind="match"``) or a timed-out partial match, with its time: the event that
    completed it, the time a pending match was released, or ``start + within``."""

    kind: Literal["match", "timeout"]
    match: Match
    ts: int


class KeyState:
    """A key's runs and its shared buffer (the events waiting for the watermark are kept apart:
    adding one must not read these)."""

    __slots__ = ("buffer", "nfa")

    def __init__(self, nfa: NFAState, buffer: SharedBuffer | None = None) -> None:
        self.nfa = nfa
        self.buffer = SharedBuffer() if buffer is None else buffer

    @property
    def partial_matches(self) -> int:
        """Runs that hold an event (the start state's run is not a partial match)."""
        return sum(1 for r in self.nfa.partial if r.start_event is not None)

    def waiting_in(self) -> list[str]:
        """The pattern each partial match waits in, oldest match first (the NFA's state names
        without their ``:n`` suffix)."""
        runs = sorted((r for r in self.nfa.partial if r.start_event is not None),
                      key=lambda r: r.priority)  # fmt: skip
        return [r.state.split(":")[0] for r in runs]

    def is_idle(self) -> bool:
        """No partial or held match and no event in the buffer: the key may drop its state."""
        return not self.nfa.completed and not self.buffer.events and self.partial_matches == 0

    def to_stored(self) -> list[Any]:
        return [
            STORED_VERSION,
            [_run_stored(r) for r in self.nfa.partial.items],
            [_run_stored(r) for r in self.nfa.completed.items],
            self.buffer.to_stored(),
        ]

    @classmethod
    def from_stored(cls, stored: list[Any]) -> KeyState:
        version, partial, completed, buffer = stored
        if version != STORED_VERSION:
            raise ValueError(f"pattern state of version {version}; this weir reads 1")
        return cls(NFAState(_queue(partial), _queue(completed)), SharedBuffer.from_stored(buffer))


class Matcher:
    """A compiled pattern driving any key's state."""

    def __init__(self, compiled: Compiled) -> None:
        self.nfa = NFA(compiled)

    def new_state(self) -> KeyState:
        return KeyState(self.nfa.initial_state())

    def run(
        self, state: KeyState, events: Sequence[tuple[int, Any]], watermark: int
    ) -> list[Output]:
        """Feed ``events`` (``(timestamp, event)``, in time order, none after ``watermark``) to
        the NFA, advancing time before each timestamp and at last to ``watermark``; returns
        the matches and timeouts in the order they happened."""
        out: list[Output] = []
        nfa, buffer = self.nfa, state.buffer
        last: int | None = None
        for ts, event in events:
            if ts != last:
                self._advance_time(state, ts, out)
                last = ts
            out += [Output("match", m, ts) for m in nfa.process(buffer, state.nfa, event, ts)]
        self._advance_time(state, watermark, out)
        return out

    def _advance_time(self, state: KeyState, ts: int, out: list[Output]) -> None:
        matches, timeouts = self.nfa.advance_time(state.buffer, state.nfa, ts)
        out += [Output("match", m, ts) for m in matches]
        out += [Output("timeout", m, at) for m, at in timeouts]

    def next_timeout(self, state: KeyState) -> int | None:
        """When the key's oldest partial match times out (``None``: never)."""
        return self.nfa.next_timeout(state.nfa)


def _run_stored(run: Run) -> list[Any]:
    return [
        run.state,
        run.node,
        list(run.version),
        run.start_ts,
        run.previous_ts,
        run.start_event,
    ]


def _queue(stored: list[Any]) -> RunQueue:
    """Runs back in their stored (heap array) order: the queue's order is part of the state."""
    queue = RunQueue()
    for state, node, version, start_ts, prev_ts, start in stored:
        queue.items.append(
            Run(
                state,
                None if node is None else (node[0], node[1], node[2]),
                tuple(version),
                start_ts,
                prev_ts,
                None if start is None else (start[0], start[1]),
            )
        )
    return queue
