"""Loading a backfill's SST files into state: a savepoint a job starts from, or a running job.

Savepoint: for each worker range of ``--parallelism``, a fresh RocksDB ingests every backfilled
operator's SST files of its key groups (``ingest_external_file``), is checkpointed, and is
stored in the checkpoint layout with ``_metadata`` marking it a savepoint; ``weir run --restore
<it>`` starts from it (all its operators), its watermark the history's. The files come from a
directory or object storage (``state.bulkstore``: there, downloaded per worker range with their
CRC-32 checked). Running job: see ``control/backfill.py``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from weir.base.errors import ConfigError
from weir.base.files import private_dir
from weir.engine.job import Job
from weir.engine.spark.backfill import BackfillResult
from weir.engine.watermarks import MIN_WATERMARK
from weir.state import layout
from weir.state.bulkload import backfill_files
from weir.state.bulkstore import fetch_ssts
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange, range_for_operator
from weir.state.objectstore import storage_location
from weir.state.rocksdb import RocksState


def sst_files(sst_dir: str, kgs: KeyGroupRange, scratch: Path) -> list[Path]:
    """The backfill's SST files of key groups ``kgs``, in key-group order: in place in a
    directory; from object storage, downloaded into ``scratch`` with their CRC-32 checked."""
    where = storage_location(sst_dir)
    if where.path is not None:
        return [p for kg, p in backfill_files(where.path) if kg in kgs]
    return [p for _, p in fetch_ssts(where, kgs, scratch)]


def make_savepoint(
    job: Job,
    results: list[BackfillResult],
    root: str | Path,
    work_dir: Path | None,
    parallelism: int = 1,
) -> str:
    """A savepoint of ``job`` under ``root/<job>/chk-<n>`` (a directory or S3) holding the
    backfilled windows of every operator in ``results`` (each its ``sst_dir``, a directory or
    S3): one savepoint a job restores all its operators from. Its RocksDB instances are built
    under ``work_dir`` (None: a temporary directory). Returns where it is.

    Raises:
        ConfigError: ``results`` is empty or names an operator twice.
    """
    names = [r.op for r in results]
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"a savepoint needs one backfill per operator, got {names}")
    storage = CheckpointStorage(root, job.name)
    storage.ensure()
    n = storage.next_id()
    temporary = work_dir is None
    if work_dir is None:
        work_dir = Path(tempfile.mkdtemp(prefix="weir-savepoint-"))
    build = private_dir(work_dir) / f".build-{job.name}-{n}"
    shutil.rmtree(build, ignore_errors=True)
    workers: list[dict[str, Any]] = []
    # one source feeds every operator: the history's watermark is the same for each (the
    # minimum, should an operator's input have held no record at all)
    marks = [r.watermark for r in results if r.watermark is not None]
    wm = min(marks) if marks else MIN_WATERMARK
    try:
        for i in range(parallelism):
            kgs = range_for_operator(job.max_parallelism, parallelism, i)
            workers.append(_worker_part(storage, n, i, kgs, results, build, wm))
    finally:
        shutil.rmtree(work_dir if temporary else build, ignore_errors=True)
    storage.write_metadata(
        n,
        {
            "id": n,
            "job": job.name,
            "time": now_ms(),
            "savepoint": True,
            "backfill": {r.op: r.to_json() for r in results},
            "parallelism": parallelism,
            "max_parallelism": job.max_parallelism,
            "state_format": layout.STATE_FORMAT,
            "key_group_ranges": [w["key_groups"] for w in workers],
            "size": sum(w["size"] for w in workers),
            "incremental_size": sum(w["incremental_size"] for w in workers),
            "duration_ms": sum(r.seconds for r in results) * 1000,
            "sync_ms": 0.0,
            "async_ms": 0.0,
            "watermark": wm,
            "workers": workers,
        },
    )
    return storage.location(n)


def _worker_part(
    storage: CheckpointStorage,
    n: int,
    i: int,
    kgs: KeyGroupRange,
    results: list[BackfillResult],
    build: Path,
    wm: int,
) -> dict[str, Any]:
    """Worker ``i``'s RocksDB built from every operator's SST files of its key groups, uploaded
    as its part of savepoint ``n``; returns its entry in ``_metadata``. Each operator's files
    are ingested on their own: two operators' files of one key group may overlap in key range
    (their state ids interleave), which one ingestion refuses."""
    state = RocksState(build / f"w{i}")
    for r in results:
        files = sst_files(r.sst_dir, kgs, build / f"sst-w{i}-{r.op}")
        if files:
            state.ingest(files)
    local = build / f"chk-w{i}"
    state.checkpoint(local)
    state.close()
    refs, copied = storage.upload(local, n, i, f"backfill-{n}-w{i}", {})
    return {
        "index": i,
        "key_groups": kgs.to_json(),
        "sources": {},
        "operators": {r.op: {"watermark": wm, "data_watermark": wm} for r in results},
        "files": [f.to_json() for f in refs],
        "size": sum(f.size for f in refs),
        "incremental_size": copied,
        "sync_ms": 0.0,
        "async_ms": 0.0,
    }
