"""Drive a join's co-process function through the keyed co-process runtime directly, batched as
the tests draw, state written to a real backend, and the runtime rebuilt from that state (a
restore) where the tests ask.

A batch is split by input as a worker's delivery is (the first input's records, then the
second's), so the runtime's merge by watermark (``operators/interleave.py``) is what puts them
back in order; ``ordered=True`` runs the function in exactly the given order instead (a
one-input process runtime and a tiny adapter), for the rules that depend on the order of
records under one watermark (session merging)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from tests.support.join_reference import MAX_TIME, Arrival
from weir.engine.job import CoProcessNode, ProcessNode
from weir.engine.runtime.operators.coprocess import CoProcessRuntime
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange
from weir.state.memory import MemoryState

MAX_PAR = 16


class TwoInputs:
    """A co-process function as today's one-input process function: items are (side, record)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def process(self, item: tuple[str, Any], ctx: Any) -> None:
        side, event = item
        (self.fn.process1 if side == "left" else self.fn.process2)(event, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        self.fn.on_timer(timestamp, ctx)


@dataclass
class Driven:
    results: list[Any] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)


class JoinDriver:
    """One join function in a ``ProcessRuntime`` over ``state``; ``feed`` a batch, ``advance``
    the watermark, ``restart`` from what was flushed."""

    def __init__(
        self,
        fn: Any,
        state: StateBackend | None = None,
        name: str = "joined",
        ordered: bool = False,
    ) -> None:
        self.ordered = ordered
        if ordered:
            self.op = ProcessNode(name, "key", TwoInputs(fn))
        else:
            self.op = CoProcessNode(name, "key", fn, second_key="key")
        self.op.side_outputs["late"] = []
        self.state = state or MemoryState()
        self.out = Driven()
        self._dead = DeadLetters(None)
        self.rt = self._runtime()

    def _runtime(self) -> ProcessRuntime:
        args = (self.state, KeyGroupRange(0, MAX_PAR - 1), MAX_PAR, LateRecords(None),
                self._dead, 3_600_000)  # fmt: skip
        if isinstance(self.op, CoProcessNode):
            return CoProcessRuntime(self.op, *args)
        return ProcessRuntime(self.op, *args)

    def feed(self, arrivals: Sequence[Arrival]) -> None:
        """One delivery: its records, then the watermark unchanged (records run by then)."""
        if self.ordered:
            self.rt.process(*_columns(arrivals, lambda a: (a.side, a.rec)))
        else:
            # each run of one side's arrivals as one call, in arrival order: the order is the
            # input (an interval join's result depends on it: DESIGN.md, join_reference), so a
            # delivery must not move a later left record before an earlier right one
            assert isinstance(self.rt, CoProcessRuntime)
            for side, run in groupby(arrivals, key=lambda a: a.side):
                call = self.rt.process if side == "left" else self.rt.process2
                call(*_columns(list(run)))
        self.rt.advance(self.rt.watermark, self.rt.data_watermark)
        self._collect()

    def advance(self, watermark: int) -> None:
        self.rt.advance(watermark, watermark)
        self._collect()

    def restart(self) -> None:
        """Write everything and build a new runtime from the backend (a restore)."""
        self.rt.flush()
        wm = self.rt.watermark
        self.rt = self._runtime()
        self.rt.restore(wm, wm)

    def _collect(self) -> None:
        self.out.results += self.rt.drain()
        self.out.late += self.rt.drain_side().get("late", [])
        self.out.dead += self._dead._pending
        self._dead._pending = []

    def buffer(self, key: str, side: str) -> list[Any]:
        """A key's buffer of one side as stored: ``[[ts, record], ...]``."""
        self.rt.flush()
        cell = self.rt.cell(key, side, "value")
        return list(cell[2] or [])


def _columns(
    arrivals: Sequence[Arrival], rec: Any = None
) -> tuple[list[str], list[Any], list[int], list[int]]:
    return (
        [a.key for a in arrivals],
        [a.rec if rec is None else rec(a) for a in arrivals],
        [a.ts for a in arrivals],
        [a.wm for a in arrivals],
    )


def drive(
    fn: Any,
    arrivals: Sequence[Arrival],
    sizes: Sequence[int] = (),
    restarts: Sequence[bool] = (),
    state: StateBackend | None = None,
    ordered: bool = False,
) -> Driven:
    """All ``arrivals`` in batches of ``sizes`` (the rest in one), the watermark advanced after
    each batch to the next record's, a restart after the batches ``restarts`` marks, then the
    final watermark."""
    d = JoinDriver(fn, state, ordered=ordered)
    pos, cuts = 0, [*sizes, max(len(arrivals) - sum(sizes), 0)]
    for i, n in enumerate(cuts):
        batch = arrivals[pos : pos + n]
        pos += n
        if batch:
            d.feed(batch)
        if pos < len(arrivals):
            d.advance(arrivals[pos].wm)
        if i < len(restarts) and restarts[i]:
            d.restart()
    d.advance(MAX_TIME)
    return d.out
