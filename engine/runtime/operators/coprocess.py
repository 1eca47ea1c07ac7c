"""Keyed co-process functions (Flink's KeyedCoProcessFunction): two inputs sharing one key's
state and timers, on the one-input process runtime.

When both inputs branch off one source, a delivery holds a batch's first-input records, then
its second-input records; they run merged by the watermark each arrived under (``interleave``),
so no record runs after timers that a later record's watermark has fired.
"""

from __future__ import annotations

from typing import Any

from weir.engine.nodes import CoProcessNode
from weir.engine.runtime.operators.interleave import Pending
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange


class CoProcessRuntime(ProcessRuntime):
    """A keyed co-process function (``CoProcessNode``): ``process`` feeds the first input
    to ``fn.process1``, ``process2`` the second to ``fn.process2``; state, timers, outputs,
    snapshots and restore are the one-input runtime's, so the key's state is one."""

    def __init__(
        self,
        op: CoProcessNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
    ) -> None:
        super().__init__(op, state, key_groups, max_parallelism, late, dead, retention_ms)
        self._inputs = (op.function.process1, op.function.process2)
        self._pending = Pending()  # a delivery's records, run in watermark order (interleave)

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        self._pending.add(0, keys, recs, ts, wms)

    def process2(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        self._pending.add(1, keys, recs, ts, wms)

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        for side, keys, recs, ts, wms in self._pending.take():
            self._run(self._inputs[side], keys, recs, ts, wms)
        super().advance(watermark, data_watermark, trace)
