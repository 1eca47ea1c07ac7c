"""Restore a worker's RocksDB from a checkpoint, at the same or another parallelism.

Same ranges: the worker's files are linked back into place and opened. Other ranges (rescaling),
as Flink does: the old instance with the largest overlap becomes the base and loses the key
groups outside the new range (``delete_range``); every other overlapping old instance is opened
on its own and the new range's keys are copied in. Every state key starts with its key group
(state/layout.py), so each of these is a range operation.

Broadcast state lies outside every key group: one whole copy per worker. A restore at the same
ranges keeps each worker's own; on a rescale every new worker takes old worker 0's (Flink gives
each new task one old task's copy), so the new copies are equal even where the old ones were
not (broadcast records of several splits may reach the workers in different orders).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteBatch

from weir.base.errors import StateError
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange
from weir.state.layout import BROADCAST_BOUNDS, key_group_bounds
from weir.state.rocksdb import _scan
from weir.state.rocksopts import RocksOptions

log = logging.getLogger(__name__)

_COPY_BATCH = 10_000


def _range(raw: list[int]) -> KeyGroupRange:
    return KeyGroupRange(int(raw[0]), int(raw[1]))


def _overlap(a: KeyGroupRange, b: KeyGroupRange) -> KeyGroupRange:
    return KeyGroupRange(max(a.start, b.start), min(a.end, b.end))


def restore_worker_db(
    storage: CheckpointStorage,
    n: int,
    meta: dict[str, Any],
    new_range: KeyGroupRange,
    target: Path,
    cache: Path | None = None,
    *,
    broadcast: bool = False,
) -> dict[str, FileRef]:
    """Build the RocksDB at ``target`` holding exactly ``new_range`` of checkpoint ``n``. Only
    the files of the old instances overlapping ``new_range`` are fetched; ``cache``: local
    copies of remote SST files to link instead of downloading (``CheckpointStorage.materialize``).
    ``broadcast``: the job keeps broadcast state, so on a rescale old worker 0's copy replaces
    the base's (its files are fetched for that alone when it does not overlap ``new_range``).

    Returns the SST files the new instance still shares with the checkpoint by local name (so
    the next checkpoint need not upload them again); empty after a rescale."""
    workers = meta["workers"]
    overlapping = [
        (len(_overlap(_range(w["key_groups"]), new_range)), w)
        for w in workers
        if len(_overlap(_range(w["key_groups"]), new_range)) > 0
    ]
    overlapping.sort(key=lambda item: -item[0])
    shutil.rmtree(target, ignore_errors=True)
    if not overlapping:
        return {}
    base = overlapping[0][1]
    base_files = [FileRef.from_json(f) for f in base["files"]]
    storage.materialize(n, int(base["index"]), base_files, target, cache)
    if _range(base["key_groups"]) == new_range and len(overlapping) == 1:
        return {f.name: f for f in base_files if f.shared is not None}
    opts = RocksOptions().to_options()
    try:
        db = Rdict(str(target), opts)
    except Exception as exc:
        raise StateError(f"cannot open restored state at {target}: {exc}") from exc
    try:
        old = _range(base["key_groups"])
        lo, hi = key_group_bounds(new_range.start, new_range.end)
        if old.start < new_range.start:
            db.delete_range(key_group_bounds(old.start, new_range.start - 1)[0], lo)
        if old.end > new_range.end:
            db.delete_range(hi, key_group_bounds(new_range.end + 1, old.end)[1])
        for _, w in overlapping[1:]:
            kgs = _overlap(_range(w["key_groups"]), new_range)
            lo, hi = key_group_bounds(kgs.start, kgs.end)
            _copy_range(storage, n, w, lo, hi, db, target, cache, f"key groups {kgs.to_json()}")
        first = next((w for w in workers if int(w["index"]) == 0), base)
        if broadcast and first is not base:
            db.delete_range(*BROADCAST_BOUNDS)
            _copy_range(storage, n, first, *BROADCAST_BOUNDS, db, target, cache, "broadcast state")
        db.flush()
    finally:
        db.close()
    return {}


def _copy_range(
    storage: CheckpointStorage,
    n: int,
    worker: dict[str, Any],
    lo: bytes,
    hi: bytes,
    into: Rdict,
    target: Path,
    cache: Path | None,
    what: str,
) -> None:
    """Copy the keys in ``[lo, hi)`` of old ``worker``'s instance into ``into``."""
    tmp = target.parent / f"{target.name}.restore-{worker['index']}"
    files = [FileRef.from_json(f) for f in worker["files"]]
    storage.materialize(n, int(worker["index"]), files, tmp, cache)
    try:
        src = Rdict(str(tmp), RocksOptions().to_options())
    except Exception as exc:
        raise StateError(f"cannot open checkpointed state at {tmp}: {exc}") from exc
    try:
        batch = WriteBatch(raw_mode=True)
        count = 0
        for k, v in _scan(src, lo, hi):
            batch.put(k, v)
            count += 1
            if count % _COPY_BATCH == 0:
                into.write(batch)
                batch = WriteBatch(raw_mode=True)
        into.write(batch)
        log.info(
            "restore copied %s (%d entries) from worker %s of chk-%d",
            what,
            count,
            worker["index"],
            n,
        )
    finally:
        src.close()
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["restore_worker_db"]
