"""The NFA's runs (Flink's ``ComputationState``), their versions (``DeweyNumber``) and the
queue that orders them (``NFAState``'s ``PriorityQueue``).

A run is a partial match: the state it waits in, the shared-buffer node of its last event, its
version, and when and with which event it started. Versions tell the branches of a run apart:
a branch's version extends its parent's (``add_stage``) or counts up beside it (``increase``);
the shared buffer keeps one edge per version, and a match is read back along the edges whose
versions are *compatible* with its own.

``RunQueue`` is Java's ``PriorityQueue`` (a binary heap, ``siftUp``/``siftDown``, bulk removal
then ``heapify``), reproduced so that runs of equal priority (the same first event) come out
in the order Flink's come out: which of two such matches a skip strategy keeps depends on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from weir.engine.cep.skip import EventId

Dewey = tuple[int, ...]
NodeId = tuple[int, int, str]  # the event's (timestamp, n) and the pattern name it took it for

_LAST = (2**63, 2**31)  # the priority of a run with no event yet: after every other


def increase(version: Dewey, by: int = 1) -> Dewey:
    return (*version[:-1], version[-1] + by)


def add_stage(version: Dewey) -> Dewey:
    return (*version, 0)


def compatible(version: Dewey, other: Dewey) -> bool:
    """Is ``version`` a descendant of ``other`` (a longer version with ``other`` as prefix, or
    one of the same length with equal leading digits and a last digit at least as large)?"""
    n = len(other)
    if len(version) > n:
        return version[:n] == other
    if len(version) == n:
        return version[:-1] == other[:-1] and version[-1] >= other[-1]
    return False


@dataclass(frozen=True, slots=True)
class Run:
    """A computation state: equal runs are the same partial match (Java's ``equals``)."""

    state: str
    node: NodeId | None  # the shared-buffer node of the run's last event
    version: Dewey
    start_ts: int = -1
    previous_ts: int = -1
    start_event: EventId | None = None

    @property
    def priority(self) -> tuple[int, int]:
        """Runs are ordered by their first event (a run with none last)."""
        return _LAST if self.start_event is None else self.start_event


def start_run(state: str, version: Dewey = (1,)) -> Run:
    return Run(state, None, version)


class RunQueue:
    """Java's ``PriorityQueue<ComputationState>`` ordered by ``Run.priority``: iteration is the
    heap's array order, ``poll`` takes the least."""

    __slots__ = ("items",)

    def __init__(self, items: list[Run] | None = None) -> None:
        self.items: list[Run] = []
        for run in items or ():
            self.offer(run)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Run]:
        return iter(list(self.items))

    def __contains__(self, run: object) -> bool:
        return run in self.items

    def peek(self) -> Run | None:
        return self.items[0] if self.items else None

    def offer(self, run: Run) -> None:
        items = self.items
        k = len(items)
        items.append(run)
        key = run.priority
        while k > 0:
            parent = (k - 1) >> 1
            above = items[parent]
            if key >= above.priority:
                break
            items[k] = above
            k = parent
        items[k] = run

    def poll(self) -> Run | None:
        items = self.items
        if not items:
            return None
        first = items[0]
        last = items.pop()
        if items:
            self._sift_down(0, last)
        return first

    def remove_if(self, doomed: Callable[[Run], bool]) -> None:
        """Java's ``bulkRemove``: keep the others in array order, then ``heapify``."""
        kept = [r for r in self.items if not doomed(r)]
        if len(kept) == len(self.items):
            return
        self.items = kept
        for i in range((len(kept) >> 1) - 1, -1, -1):
            self._sift_down(i, kept[i])

    def _sift_down(self, k: int, run: Run) -> None:
        items = self.items
        n = len(items)
        half = n >> 1
        key = run.priority
        while k < half:
            child = 2 * k + 1
            best = items[child]
            right = child + 1
            if right < n and best.priority > items[right].priority:
                child = right
                best = items[right]
            if key <= best.priority:
                break
            items[k] = best
            k = child
        items[k] = run
