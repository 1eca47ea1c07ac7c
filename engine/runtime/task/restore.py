"""A worker's start from a checkpoint: its RocksDB rebuilt for its key-group range (any
parallelism: ranges are re-cut, ``state/restore.py``), its splits' offsets and watermarks, the
watermark each input channel starts at, and each operator's watermarks.

The checkpoint's ``_metadata`` is read as the JSON document the job manager wrote (one entry per
worker of the checkpoint, ``messages.WorkerSnapshot.to_json``).
"""

from __future__ import annotations

import logging
from typing import Any

from weir.base.errors import WeirError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.stored import stores_cells
from weir.engine.runtime.task.channels import Input, Inputs
from weir.engine.runtime.task.graph import SplitId
from weir.engine.runtime.task.sources import SourceSide, SplitStart
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK, WatermarkStrategy
from weir.state import layout
from weir.state.backend import StateBackend
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange
from weir.state.restore import restore_worker_db

log = logging.getLogger(__name__)


def restore_db(
    cfg: RunConfig,
    chk: str,
    job_name: str,
    max_parallelism: int,
    index: int,
    key_groups: KeyGroupRange,
    own: CheckpointStorage,
    broadcast: bool = False,
) -> tuple[dict[str, Any], dict[str, FileRef]]:
    """Rebuild worker ``index``'s RocksDB from checkpoint ``chk`` (a path or URL). Returns the
    checkpoint's metadata, and the SST files the next checkpoint may reference (those already
    in this job's own storage). ``broadcast``: the job keeps broadcast state."""
    storage, n = CheckpointStorage.at(chk)
    meta = storage.metadata(n)
    if int(meta["max_parallelism"]) != max_parallelism:
        raise WeirError(
            f"checkpoint {chk} has max_parallelism={meta['max_parallelism']} but the job has "
            f"{max_parallelism}; key groups cannot change, restore with the same"
        )
    target = cfg.worker_state_path(job_name, index)
    cache = cfg.sst_cache_path(job_name) if storage.store.remote else None
    known = restore_worker_db(storage, n, meta, key_groups, target, cache, broadcast=broadcast)
    log.info("worker=%d restored key groups %s from %s", index, key_groups.to_json(), chk)
    return meta, (known if storage.where == own.where else {})


def restore_positions(
    meta: dict[str, Any],
    strategies: list[WatermarkStrategy],
    every: list[SplitId],
    parallelism: int,
    sides: list[SourceSide],
    channels: list[Inputs],
) -> dict[int, SplitStart]:
    """Split offsets and watermarks as of the checkpoint; every sender's channel of each source
    starts at the watermark its splits of that source had (the same rule at any parallelism).
    Returns where this worker's splits start, per source index."""
    saved: dict[str, Any] = {}
    for w in meta["workers"]:
        saved.update(w["sources"])
    saved = _one_source_positions_to_the_first(saved, every)
    starts: dict[int, SplitStart] = {}
    for side in sides:
        strategy = strategies[side.index]
        start = starts[side.index] = SplitStart()
        for split, mark in side.inputs.inputs.items():
            st = saved.get(split)
            if st is None:
                continue  # a split the checkpoint did not have (a new file): from its start
            start.max_ts[split] = int(st["max_ts"])
            mark.watermark = mark.data_watermark = strategy.watermark_for(int(st["max_ts"]))
            start.offsets[split] = int(st["offset"])
            if st["ended"]:
                mark.watermark, mark.ended = MAX_WATERMARK, True
                start.ended[split] = int(st["offset"])
    for j in range(parallelism):
        theirs = every[j::parallelism]
        for src, marks in enumerate(channels):
            mine = [saved.get(s.id) for s in theirs if s.source == src]
            if mine:
                _start_channel(marks.inputs[str(j)], mine, strategies[src])
    return starts


def _one_source_positions_to_the_first(
    saved: dict[str, Any], every: list[SplitId]
) -> dict[str, Any]:
    """A one-source job's checkpoint names its splits bare; once the job has several sources,
    split ids carry their source's name. The bare names are the first source's (the job's
    original one, which the added sources follow), so it resumes where it was instead of from
    its start."""
    if any(s.id in saved for s in every) or all(s.id == s.split for s in every):
        return saved
    first = {s.split: s.id for s in every if s.source == 0}
    if not any(k in first for k in saved):
        return saved
    log.info("one-source checkpoint: its splits are source 0's (%s)", ", ".join(sorted(first)))
    return {first.get(k, k): v for k, v in saved.items()}


def _start_channel(
    channel: Input, positions: list[dict[str, Any] | None], strategy: WatermarkStrategy
) -> None:
    """The channel from a worker whose splits were at ``positions`` (None: not in the
    checkpoint) starts at the minimum of their watermarks, ended once all of them had."""
    marks, data_marks, all_ended = [], [], True
    for st in positions:
        max_ts = int(st["max_ts"]) if st else MIN_WATERMARK
        done = bool(st and st["ended"])
        marks.append(MAX_WATERMARK if done else strategy.watermark_for(max_ts))
        if not (done and max_ts == MIN_WATERMARK):
            data_marks.append(strategy.watermark_for(max_ts))
        all_ended = all_ended and done
    channel.watermark = min(marks)
    channel.data_watermark = min(data_marks, default=MIN_WATERMARK)
    channel.ended = all_ended


def restore_operators(
    meta: dict[str, Any], ops: dict[str, OperatorRuntime], state: StateBackend
) -> None:
    """Each operator resumes at the minimum of its watermarks over the checkpoint's workers,
    from state in this weir's format: a checkpoint's from before cells is migrated first
    (format 2's cells are format 3's as they are)."""
    found = layout.format_of(meta)
    if found < layout.CELLS_FORMAT:
        for name, rt in ops.items():
            if isinstance(rt, WindowRuntime) and stores_cells(rt.op):
                moved = rt.migrate()
                log.info(
                    "state format %d -> %d op=%s rows=%d", found, layout.STATE_FORMAT, name, moved
                )
    mark_format(state)
    for name, rt in ops.items():
        marks = [w["operators"][name] for w in meta["workers"] if name in w["operators"]]
        if marks:
            rt.restore(
                min(int(m["watermark"]) for m in marks),
                min(int(m["data_watermark"]) for m in marks),
            )


def mark_format(state: StateBackend) -> None:
    """Record in the worker's RocksDB the state format it holds (this weir's)."""
    state.write({layout.FORMAT_KEY: str(layout.STATE_FORMAT).encode()})
