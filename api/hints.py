"""What a 404 for a key says may be why it has no state: for a window operator, that state
retention dropped its windows, with the retention horizon in event time (an operator keeps a
fired window for ``--state-retention-ms`` of event time, counted from its watermark, so a
historical input's old windows are gone once its newest records are in)."""

from __future__ import annotations

from datetime import UTC, datetime

from weir.api.registry import JobHandle
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.keygroups import operator_for_key_group


def no_state(handle: JobHandle, op_def: WindowNode | ProcessNode, key: str, kg: int) -> str:
    """The 404's message: for a window operator whose retention has dropped windows, when that
    may be why (its horizon in event time, from the key's worker's data watermark)."""
    text = f"key {key!r} has no state in operator {op_def.name!r} of job {handle.job.name!r}"
    retention = handle.runtime.state_retention_ms
    if not isinstance(op_def, WindowNode):
        return text
    workers = handle.runtime.worker_status()
    if not workers:
        return text
    owner = workers[operator_for_key_group(handle.job.max_parallelism, len(workers), kg)]
    status = owner["operators"].get(op_def.name)
    if status is None or status["data_watermark"] == MIN_WATERMARK:
        return text  # no record has reached it yet: nothing was dropped
    data_wm = status["data_watermark"]
    horizon = data_wm - op_def.allowed_lateness_ms - retention + 1
    return (
        f"{text}; if it had windows, they may have aged out: state retention dropped the "
        f"windows that ended at or before {horizon} ({_utc(horizon)}) in event time (the "
        f"operator's watermark {data_wm} minus its allowed lateness and "
        f"--state-retention-ms={retention}); to keep a historical input's windows, run with a "
        "--state-retention-ms longer than its span of event time"
    )


def _utc(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):  # outside what a datetime holds
        return "epoch ms"
