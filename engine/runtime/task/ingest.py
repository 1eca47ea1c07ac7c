"""A worker's part of a live backfill (``control/backfill.py``), in two steps.

CHECK: every SST file of the worker's key groups (downloaded first when the backfill is in object
storage) is checked entry by entry and staged, a checked copy in the worker's own directory
(``state/bulkload.py``: key groups, state ids, key and value shapes); then the worker refuses
when the backfill could touch a window of the live job:

- one it holds, open or stored (fired and kept for queries), whose end falls in the backfill's
  range, which is what the files hold (window ends and timer times), widened by what the
  request claims;
- one it can still change: a backfilled window must be closed for the live job, its end past
  allowed lateness at the worker's watermark (``is_late``), since live records could otherwise
  reach it after it was loaded.

So a forged file can neither overwrite a fired window nor one the live job is still counting.
INGEST: the staged copies, and nothing else, are ingested. The rule throughout: a backfill never
touches a window the live job has, so nothing is counted twice.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from weir.base.errors import StateError, WeirError
from weir.base.files import private_dir, write_private
from weir.engine.runtime.messages import (
    BackfillPhase,
    BackfillReply,
    BackfillRequest,
    BackfillStep,
)
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.stored import stores_cells
from weir.engine.windows import is_late
from weir.state import untrusted
from weir.state.keygroups import KeyGroupRange
from weir.state.objectstore import storage_location
from weir.state.rocksdb import RocksState

if TYPE_CHECKING:
    from weir.state.bulkload import StagedFile

STAGE_DIR = "backfill-staged"
_DOWNLOADS = "downloaded"
_REQUEST = "request.json"


def backfill_step(
    step: BackfillStep, ops: dict[str, OperatorRuntime], state: RocksState, own: KeyGroupRange
) -> BackfillReply:
    req = step.request
    rt = ops.get(req.op)
    if not isinstance(rt, WindowRuntime):
        return BackfillReply(step.request_id, step.phase, f"operator {req.op!r} is not a window "
                             "operator of this job")  # fmt: skip
    stage = state.path.parent / STAGE_DIR
    try:
        if step.phase is BackfillPhase.CHECK:
            return _check(step, rt, own, stage)
        return BackfillReply(step.request_id, step.phase, None, _ingest(step, rt, state, stage))
    except WeirError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        return BackfillReply(step.request_id, step.phase, str(exc))


def _check(step: BackfillStep, rt: WindowRuntime, own: KeyGroupRange, stage: Path) -> BackfillReply:
    from weir.state.bulkload import LoadRules, stage_sst  # loaded by a worker's first backfill

    req = step.request
    shutil.rmtree(stage, ignore_errors=True)
    private_dir(stage)
    rules = LoadRules(req.op, own, rt.op.state_id, rt.op.timer_state_id, stores_cells(rt.op))
    files = _sources(req, own, stage / _DOWNLOADS)
    staged = [stage_sst(copy, kg, rules, stage / copy.name, shown) for kg, copy, shown in files]
    shutil.rmtree(stage / _DOWNLOADS, ignore_errors=True)
    loaded = [s for s in staged if s.path is not None]
    lo = min((s.min_end for s in loaded if s.min_end is not None), default=None)
    hi = max((s.max_end for s in loaded if s.max_end is not None), default=None)
    error = _still_open(rt, loaded) or _conflict(
        rt,
        req.min_end if lo is None else min(lo, req.min_end),
        req.max_end if hi is None else max(hi, req.max_end),
    )
    if error is not None:
        shutil.rmtree(stage, ignore_errors=True)
        return BackfillReply(step.request_id, step.phase, error)
    manifest = {"op": req.op, "path": req.path, "files": [s.path.name for s in loaded if s.path]}
    write_private(stage / _REQUEST, json.dumps(manifest).encode())
    return BackfillReply(step.request_id, step.phase, None, len(loaded), lo, hi)


def _sources(
    req: BackfillRequest, own: KeyGroupRange, downloads: Path
) -> list[tuple[int, Path, Path]]:
    """Private copies of the backfill's files of the worker's key groups, each with its key
    group and the file it copies. From a directory: exactly the files the job manager checked
    (never a listing of the directory now), each opened without following a symlink and read
    from that descriptor only if it is still a regular file of the checked size; so a FIFO
    cannot block the worker, nor a link added since lead out. From object storage: downloaded
    with the manifest's size and CRC-32 checked (a cluster task reaches S3 with the settings
    the job manager forwarded)."""
    from weir.state.bulkload import key_group_of
    from weir.state.bulkstore import fetch_ssts

    where = storage_location(req.path)
    if where.path is None:
        return [(kg, f, f) for kg, f in fetch_ssts(where, own, downloads)]
    if not req.root:
        raise StateError(f"backfill {req.path} came without the job manager's check; load it again")
    named = [(key_group_of(f.name), f) for f in req.files]
    mine = [(kg, f) for kg, f in named if kg is not None and kg in own]
    private_dir(downloads)
    with untrusted.open_dir(Path(req.root), where.path) as d:
        return [
            (kg, untrusted.copy_out(d, f.name, req.path, f.size, downloads / f.name),
             where.path / f.name)
            for kg, f in mine
        ]  # fmt: skip


def _ingest(step: BackfillStep, rt: WindowRuntime, state: RocksState, stage: Path) -> int:
    """Ingest what CHECK staged for this very request (moved, not copied: it is a copy)."""
    req = step.request
    try:
        manifest = json.loads((stage / _REQUEST).read_bytes())
    except (OSError, ValueError):
        manifest = None
    if not manifest or manifest.get("op") != req.op or manifest.get("path") != req.path:
        raise StateError(f"backfill {req.path} was not checked by this worker; load it again")
    files = [stage / name for name in manifest["files"]]
    if files:
        state.ingest(files, move=True)
        rt.reload_timers()
    shutil.rmtree(stage, ignore_errors=True)
    return len(files)


def _conflict(rt: WindowRuntime, min_end: int, max_end: int) -> str | None:
    """Why a backfill of windows ending in ``[min_end, max_end]`` may not be loaded here: the
    operator holds such a window, stored or open (None: it holds none)."""
    rt.flush()
    if stores_cells(rt.op):
        hit = rt.stored_window_in(rt.op.state_id, min_end, max_end)
    else:
        rows = ((k, e) for k, e, _ in rt.stored_rows(rt.op.state_id) if min_end <= e <= max_end)
        hit = next(rows, None)
    if hit is not None:
        return (
            f"key {hit[0]!r} already has the window ending at {hit[1]} in the live state; "
            "backfill windows ending before the live job's first (use `to_ms`)"
        )
    open_ends = [e for e in rt.open_ends() if min_end <= e <= max_end]
    if open_ends:
        return f"the live job has open windows ending at {open_ends[0]}"
    return None


def _still_open(rt: WindowRuntime, staged: list[StagedFile]) -> str | None:
    """Why a staged file may not be loaded yet: it holds a window the live job can still change
    (None: every window in it is past its allowed lateness at the worker's watermark)."""
    lateness = rt.op.allowed_lateness_ms
    for s in staged:
        if s.max_end is not None and not is_late(s.max_end, lateness, rt.watermark):
            return (
                f"backfill file {s.source} holds the window ending at {s.max_end}, which the "
                f"live job can still change (its watermark is {rt.watermark}, allowed lateness "
                f"{lateness} ms); backfill only windows that closed before the live job's "
                "first (use `to_ms`), or load it once the live job's watermark has passed them"
            )
    return None
