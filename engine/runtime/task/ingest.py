"""A worker's part of a live backfill (``control/backfill.py``): check that it holds no window
in the backfill's range, or ingest the backfill's SST files for its key groups. The rule: a
backfill never touches a window the live job has, so nothing is counted twice."""

from __future__ import annotations

from pathlib import Path

from weir.engine.errors import WeirError
from weir.engine.runtime.messages import BackfillPhase, BackfillReply, BackfillStep
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.state.keygroups import KeyGroupRange
from weir.state.rocksdb import RocksState


def backfill_step(
    step: BackfillStep, ops: dict[str, OperatorRuntime], state: RocksState, own: KeyGroupRange
) -> BackfillReply:
    req = step.request

    def reply(error: str | None, files: int = 0) -> BackfillReply:
        return BackfillReply(step.request_id, step.phase, error, files)

    rt = ops.get(req.op)
    if not isinstance(rt, WindowRuntime):
        return reply(f"operator {req.op!r} is not a window operator of this job")
    try:
        if step.phase is BackfillPhase.CHECK:
            return reply(_conflict(rt, req.min_end, req.max_end))
        from weir.engine.spark.load import sst_files  # the backfill's layout, loaded when used

        files = sst_files(Path(req.path), own)
        if files:
            state.ingest(files)
            rt.reload_timers()
        return reply(None, len(files))
    except WeirError as exc:
        return reply(str(exc))


def _conflict(rt: WindowRuntime, min_end: int, max_end: int) -> str | None:
    """Why a backfill of windows ending in ``[min_end, max_end]`` may not be loaded here: the
    operator holds such a window, stored or open (None: it holds none)."""
    rt.flush()
    for key, end, _ in rt.stored_rows(rt.op.state_id):
        if min_end <= end <= max_end:
            return (
                f"key {key!r} already has the window ending at {end} in the live state; "
                "backfill windows ending before the live job's first (use --to)"
            )
    open_ends = [e for e in rt.buckets if min_end <= e <= max_end]
    if open_ends:
        return f"the live job has open windows ending at {open_ends[0]}"
    return None
