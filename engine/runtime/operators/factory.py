"""Which runtime runs an operator: window operators fold into windows (sliding ones on panes,
sessions merge; count and global windows, triggers and evictors run on the triggered operator),
process functions run user code with keyed state and timers."""

from __future__ import annotations

from weir.engine.job import Operator, ProcessOperator
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.codec import uses_panes
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.operators.session import SessionRuntime
from weir.engine.runtime.operators.sliding import SlidingRuntime
from weir.engine.runtime.operators.triggered import TriggeredRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.windows import SessionWindows
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange


def runtime_for(
    op: Operator,
    state: StateBackend,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    late: LateRecords,
    dead: DeadLetters,
    retention_ms: int,
) -> OperatorRuntime:
    args = (state, key_groups, max_parallelism, late, dead, retention_ms)
    if isinstance(op, ProcessOperator):
        return ProcessRuntime(op, *args)
    if op.triggered:
        return TriggeredRuntime(op, *args)
    if isinstance(op.assigner, SessionWindows):
        return SessionRuntime(op, *args)
    if uses_panes(op.assigner):
        return SlidingRuntime(op, *args)
    return WindowRuntime(op, *args)
