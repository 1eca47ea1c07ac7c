"""Which runtime runs an operator: window operators fold into windows (sessions merge), process
functions run user code with keyed state and timers."""

from __future__ import annotations

from typing import Any

from weir.engine.job import ProcessOperator, WindowOperator
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.operators.session import SessionRuntime
from weir.engine.runtime.operators.sliding import SlidingRuntime, uses_panes
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.windows import SessionWindows

OperatorRuntime = WindowRuntime | ProcessRuntime


def runtime_for(op: WindowOperator | ProcessOperator, *args: Any, **kwargs: Any) -> OperatorRuntime:
    if isinstance(op, ProcessOperator):
        return ProcessRuntime(op, *args, **kwargs)
    if isinstance(op.assigner, SessionWindows):
        return SessionRuntime(op, *args, **kwargs)
    if uses_panes(op.assigner):
        return SlidingRuntime(op, *args, **kwargs)
    return WindowRuntime(op, *args, **kwargs)
