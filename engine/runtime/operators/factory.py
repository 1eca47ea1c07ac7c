"""Which runtime runs an operator: window operators fold into windows (on columns where their
aggregates allow, ``colwindow.py``; sliding ones on panes, sessions merge; count and global
windows, triggers and evictors run on the triggered operator),
process functions run user code with keyed state and timers (co-process functions with two
inputs, broadcast functions with a broadcast input)."""

from __future__ import annotations

from collections.abc import Sequence

from weir.engine.columnar import columnar_on, operator_refusal, refusal
from weir.engine.nodes import (
    BroadcastNode,
    BroadcastProcessNode,
    CoProcessNode,
    ForwardNode,
    KeyByNode,
    KeyedBroadcastNode,
    OperatorNode,
    ProcessNode,
)
from weir.engine.runtime.operators.base import Feed, OperatorRuntime
from weir.engine.runtime.operators.broadcast import BroadcastRuntime, KeyedBroadcastRuntime
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.coprocess import CoProcessRuntime
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.operators.session import SessionRuntime
from weir.engine.runtime.operators.sliding import SlidingRuntime
from weir.engine.runtime.operators.triggered import TriggeredRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import uses_panes
from weir.engine.windows import SessionWindows
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange


def runtime_for(
    op: OperatorNode,
    state: StateBackend,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    late: LateRecords,
    dead: DeadLetters,
    retention_ms: int,
    columns: bool | None = None,
) -> OperatorRuntime:
    """The runtime of ``op``; a window operator folds columns when ``columns`` (None: when it
    can, ``columnar.operator_refusal``, and the columnar path is on)."""
    args = (state, key_groups, max_parallelism, late, dead, retention_ms)
    if isinstance(op, BroadcastProcessNode):
        return BroadcastRuntime(op, *args)
    if isinstance(op, KeyedBroadcastNode):
        return KeyedBroadcastRuntime(op, *args)
    if isinstance(op, CoProcessNode):
        return CoProcessRuntime(op, *args)
    if isinstance(op, ProcessNode):
        return ProcessRuntime(op, *args)
    if op.triggered:
        return TriggeredRuntime(op, *args)
    if isinstance(op.assigner, SessionWindows):
        return SessionRuntime(op, *args)
    if columns is None:
        columns = columnar_on() and operator_refusal(op) is None
    if columns:
        return ColumnWindowRuntime(op, *args)
    if uses_panes(op.assigner):
        return SlidingRuntime(op, *args)
    return WindowRuntime(op, *args)


def runtimes_for(
    keyby: Sequence[KeyByNode | BroadcastNode | ForwardNode],
    state: StateBackend,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    late: LateRecords,
    dead: DeadLetters,
    retention_ms: int,
) -> tuple[dict[str, OperatorRuntime], list[list[tuple[str, Feed]]]]:
    """One runtime per operator under the job's ``keyby`` nodes, and per node what each of its
    operators takes its records with (a co-process function's second input: ``process2``; a
    broadcast node's: ``process_broadcast``)."""
    args = (state, key_groups, max_parallelism, late, dead, retention_ms)
    runtimes: dict[str, OperatorRuntime] = {}
    feeds: list[list[tuple[str, Feed]]] = []
    for node in keyby:
        fed: list[tuple[str, Feed]] = []
        columns = refusal(node) is None  # every operator of the node, or none, on columns
        for op in node.children:
            rt = runtimes.get(op.name)
            if rt is None:
                rt = runtimes[op.name] = runtime_for(op, *args, columns=columns)
            if isinstance(node, BroadcastNode) and isinstance(rt, KeyedBroadcastRuntime):
                fed.append((op.name, rt.process_broadcast))
            elif isinstance(rt, CoProcessRuntime) and isinstance(op, CoProcessNode):
                fed.append((op.name, rt.process2 if op.second is node else rt.process))
            else:
                fed.append((op.name, rt.process))
        feeds.append(fed)
    return runtimes, feeds
