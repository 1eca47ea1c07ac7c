"""Which runtime runs an operator: window operators fold into windows (on columns where their
aggregates allow, ``colwindow.py``; sliding ones on panes, sessions merge; count and global
windows, triggers and evictors run on the triggered operator),
process functions run user code with keyed state and timers (co-process functions with two
inputs, broadcast functions with a broadcast input).

Each runtime's module is imported when an operator first needs it (``runtime_class``), so a
worker loads the runtimes of its job's operators only; a zygote imports them before it forks
the workers (``load_runtimes``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

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
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import uses_panes
from weir.engine.windows import SessionWindows
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange

if TYPE_CHECKING:
    from weir.engine.runtime.operators.broadcast import KeyedBroadcastRuntime
    from weir.engine.runtime.operators.coprocess import CoProcessRuntime

# a runtime's constructor: (op, state, key_groups, max_parallelism, late, dead, retention_ms)
Runtime = Callable[..., OperatorRuntime]


def runtime_class(op: OperatorNode, columns: bool | None = None) -> Runtime:
    """The class of ``op``'s runtime, its module imported now if it was not (see
    ``runtime_for`` for ``columns``)."""
    if isinstance(op, ProcessNode):
        return _process_class(op)
    if op.triggered:
        from weir.engine.runtime.operators.triggered import TriggeredRuntime

        return TriggeredRuntime
    if isinstance(op.assigner, SessionWindows):
        from weir.engine.runtime.operators.session import SessionRuntime

        return SessionRuntime
    if columns is None:
        columns = columnar_on() and operator_refusal(op) is None
    if columns:
        from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime

        return ColumnWindowRuntime
    if uses_panes(op.assigner):
        from weir.engine.runtime.operators.sliding import SlidingRuntime

        return SlidingRuntime
    from weir.engine.runtime.operators.window import WindowRuntime

    return WindowRuntime


def _process_class(op: ProcessNode) -> Runtime:
    if isinstance(op, BroadcastProcessNode):
        from weir.engine.runtime.operators.broadcast import BroadcastRuntime

        return BroadcastRuntime
    if isinstance(op, KeyedBroadcastNode):
        from weir.engine.runtime.operators.broadcast import KeyedBroadcastRuntime

        return KeyedBroadcastRuntime
    if isinstance(op, CoProcessNode):
        from weir.engine.runtime.operators.coprocess import CoProcessRuntime

        return CoProcessRuntime
    from weir.engine.runtime.operators.process import ProcessRuntime

    return ProcessRuntime


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
    return runtime_class(op, columns)(op, *args)


def load_runtimes(keyby: Sequence[KeyByNode | BroadcastNode | ForwardNode]) -> None:
    """Import the runtimes of the operators under ``keyby`` as ``runtimes_for`` picks them:
    what a zygote's workers run, imported once before it forks them."""
    for node in keyby:
        columns = refusal(node) is None
        for op in node.children:
            runtime_class(op, columns)


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
            # the runtime's class follows the node's (runtime_class): KeyedBroadcastNode's
            # runs on a KeyedBroadcastRuntime, CoProcessNode's on a CoProcessRuntime
            if isinstance(node, BroadcastNode) and isinstance(op, KeyedBroadcastNode):
                fed.append((op.name, cast("KeyedBroadcastRuntime", rt).process_broadcast))
            elif isinstance(op, CoProcessNode):
                co = cast("CoProcessRuntime", rt)
                fed.append((op.name, co.process2 if op.second is node else co.process))
            else:
                fed.append((op.name, rt.process))
        feeds.append(fed)
    return runtimes, feeds


def load_every_runtime() -> None:
    """Import every operator runtime: what the workers of a job not known before their zygote
    forks (a Python job file, which each worker loads) may run."""
    from weir.engine.runtime.operators import (  # noqa: F401 - imported for the workers
        broadcast,
        coprocess,
        process,
        session,
        sliding,
        triggered,
    )
