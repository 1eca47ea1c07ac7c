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
            return reply(rt.backfill_conflict(req.min_end, req.max_end))
        from weir.engine.spark.load import sst_files  # the backfill's layout, loaded when used

        files = sst_files(Path(req.path), own)
        if files:
            state.ingest(files)
            rt.reload_timers()
        return reply(None, len(files))
    except WeirError as exc:
        return reply(str(exc))
