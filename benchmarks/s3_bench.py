"""``make bench-s3``: checkpoint storage on S3 beside a local directory (issue 18), against a real
S3-compatible server on loopback (SeaweedFS, ``tests/support/s3_server.py``), every ratio from
one run:

1. ``throughput``: the checkpoint benchmark's job (``checkpoint_bench``: two JSONL splits, p=2,
   a checkpoint every second), its checkpoints to a local directory and to S3, alternating run
   by run; events/s both ways, the median of the per-round ratios (goal: >= 0.9), the ratio of
   the best runs, and the workers' CPU per run. The S3 server shares this host's cores.
2. ``incremental``: a worker's RocksDB (``RocksState``, weir's options and state-key layout) with
   1M keys, checkpointed and uploaded as a worker does (``CheckpointStorage.upload``); then 1% of
   the keys updated and checkpointed again, several times. The bytes each checkpoint uploaded,
   as a share of the first (goal: < 5%), and which SST files were new.
3. ``restore``: that 1M-key checkpoint rebuilt into an empty directory and opened
   (``restore_worker_db``, what a worker does on a fresh host), from S3 and from a local
   directory, alternating.

Sections 2 and 3 drive the storage layer directly rather than a job: a job's input cannot hold
still between two checkpoints, and the end of a bounded input fires every window, so neither
the "1% updated" step nor a 1M-key final checkpoint could be pinned down through ``weir run``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from benchmarks.runs import timed_run
from tests.support.s3_server import S3Server
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange, key_group
from weir.state.layout import state_key
from weir.state.restore import restore_worker_db
from weir.state.rocksdb import RocksState

MAX_PARALLELISM = 128
WINDOW_START = 1_700_000_000_000  # every key's state is in one open window
_BATCH = 100_000


@contextmanager
def s3_server(workdir: Path) -> Iterator[S3Server]:
    """SeaweedFS on loopback, its settings in this process's environment (spawned workers
    inherit them) while it runs."""
    server = S3Server(workdir / "seaweedfs")
    server.start()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


# -- 1. throughput -------------------------------------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _checkpointed_run(job_file: Path, state_dir: Path, store: str | Path) -> dict[str, Any]:
    """One run; ``worker_cpu_s``: the CPU time of its workers (reaped when the run ends), which
    other tenants of a shared host disturb less than the wall clock."""
    cpu = _children_cpu()
    run = timed_run(job_file, state_dir, 2, checkpoint_interval_ms=1000, checkpoint_dir=store)
    taken = run.get("checkpoints", [])
    return {
        "events_per_s": run["events_per_s"],
        "worker_cpu_s": round(_children_cpu() - cpu, 3),
        "seconds": run["seconds"],
        "checkpoints": len(taken),
        "async_p50_ms": _median([c["async_ms"] for c in taken]) if taken else None,
        "uploaded_bytes": sum(c["incremental_size"] for c in taken),
    }


def throughput(job_file: Path, workdir: Path, server: S3Server, rounds: int) -> dict[str, Any]:
    """Local directory and S3 in turn, the first of each round alternating."""
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "s3": []}
    for r in range(rounds):
        order = ("local", "s3") if r % 2 == 0 else ("s3", "local")
        for kind in order:
            store: str | Path = (
                workdir / f"tp-store-{r}" if kind == "local" else server.url(f"tp-{r}")
            )
            runs[kind].append(_checkpointed_run(job_file, workdir / f"tp-{kind}-{r}", store))
            shutil.rmtree(workdir / f"tp-{kind}-{r}", ignore_errors=True)
    pairs = list(zip(runs["s3"], runs["local"], strict=True))
    ratios = [s["events_per_s"] / loc["events_per_s"] for s, loc in pairs]
    best = {k: max(r["events_per_s"] for r in v) for k, v in runs.items()}
    return {
        "rounds": rounds,
        "local_events_per_s": [r["events_per_s"] for r in runs["local"]],
        "s3_events_per_s": [r["events_per_s"] for r in runs["s3"]],
        "ratio_per_round": [round(x, 3) for x in ratios],
        "s3_over_local_median": _median(ratios),
        "s3_over_local_best": round(best["s3"] / best["local"], 3),
        # above 1: the workers spent more CPU per run with S3 (the same events both ways)
        "s3_over_local_worker_cpu_median": _median(
            [s["worker_cpu_s"] / loc["worker_cpu_s"] for s, loc in pairs]
        ),
        "local_runs": runs["local"],
        "s3_runs": runs["s3"],
    }


# -- 2. incremental upload -----------------------------------------------------------------------


def _key(i: int) -> bytes:
    name = f"user-{i:07d}"
    return state_key(key_group(name, MAX_PARALLELISM), 1, name.encode(), WINDOW_START)


def _value(count: int, rng: random.Random) -> bytes:
    return orjson.dumps([count, round(rng.uniform(0, 1e6), 3)])


def _write(state: RocksState, ids: list[int], count: int, rng: random.Random) -> None:
    for lo in range(0, len(ids), _BATCH):
        state.write({_key(i): _value(count, rng) for i in ids[lo : lo + _BATCH]})


def _checkpoint(
    state: RocksState, storage: CheckpointStorage, n: int, scratch: Path, known: dict[str, FileRef]
) -> tuple[list[FileRef], int, float]:
    """A worker's checkpoint ``n``: RocksDB checkpoint, upload, ``_metadata``."""
    local = scratch / f"chk-{n}"
    state.checkpoint(local)
    t0 = time.perf_counter()
    files, copied = storage.upload(local, n, 0, "bench-w0", known)
    seconds = time.perf_counter() - t0
    shutil.rmtree(local)
    storage.write_metadata(n, _metadata(n, files, copied))
    return files, copied, seconds


def _metadata(n: int, files: list[FileRef], copied: int) -> dict[str, Any]:
    return {
        "id": n,
        "time": int(time.time() * 1000),
        "parallelism": 1,
        "max_parallelism": MAX_PARALLELISM,
        "size": sum(f.size for f in files),
        "incremental_size": copied,
        "workers": [
            {
                "index": 0,
                "key_groups": [0, MAX_PARALLELISM - 1],
                "files": [f.to_json() for f in files],
            }
        ],
    }


def incremental(
    workdir: Path, storage: CheckpointStorage, keys: int, fraction: float, updates: int
) -> dict[str, Any]:
    """1M keys, checkpoint 1; then ``updates`` times: ``fraction`` of the keys updated and a
    checkpoint. Each checkpoint references the SST files of the one before (as a worker's
    ``_confirmed``) and uploads the rest."""
    rng = random.Random(18)
    state = RocksState(workdir / "inc-db")
    scratch = workdir / "inc-scratch"
    scratch.mkdir()
    try:
        _write(state, list(range(keys)), 1, rng)
        files, first, seconds = _checkpoint(state, storage, 1, scratch, {})
        rows = [_row(1, files, {}, first, seconds)]
        for n in range(2, updates + 2):
            known = {f.name: f for f in files if f.shared is not None}
            _write(state, sorted(rng.sample(range(keys), int(keys * fraction))), n, rng)
            files, copied, seconds = _checkpoint(state, storage, n, scratch, known)
            rows.append(_row(n, files, known, copied, seconds))
    finally:
        state.close()
    later = [r["uploaded_bytes"] for r in rows[1:]]
    return {
        "keys": keys,
        "updated_per_checkpoint": int(keys * fraction),
        "first_uploaded_bytes": first,
        "second_uploaded_bytes": later[0],
        "second_over_first": round(later[0] / first, 4),
        "max_later_over_first": round(max(later) / first, 4),
        "checkpoints": rows,
        "last_checkpoint": len(rows),
    }


def _row(
    n: int, files: list[FileRef], known: dict[str, FileRef], copied: int, seconds: float
) -> dict[str, Any]:
    ssts = [f for f in files if f.shared is not None]
    return {
        "id": n,
        "size": sum(f.size for f in files),
        "uploaded_bytes": copied,
        "upload_s": round(seconds, 3),
        "sst_files": len(ssts),
        "new_sst_files": {f.name: f.size for f in ssts if f.name not in known},
        "dropped_sst_files": sorted(set(known) - {f.name for f in ssts}),
        "other_files_bytes": sum(f.size for f in files if f.shared is None),
    }


# -- 3. restore ----------------------------------------------------------------------------------


def _restore_once(storage: CheckpointStorage, n: int, target: Path, probe: bytes) -> float:
    """Seconds to rebuild the worker's RocksDB at ``target`` and open it (one read)."""
    meta = storage.metadata(n)
    cache = target.parent / f"{target.name}-sst-cache" if storage.store.remote else None
    t0 = time.perf_counter()
    restore_worker_db(storage, n, meta, KeyGroupRange(0, MAX_PARALLELISM - 1), target, cache)
    state = RocksState(target)
    try:
        found = state.get(probe)
    finally:
        state.close()
    seconds = time.perf_counter() - t0
    if found is None:
        raise RuntimeError(f"restored state at {target} lacks key {probe!r}")
    return seconds


def _count(path: Path) -> int:
    state = RocksState(path)
    try:
        return sum(1 for _ in state.scan(b"", b"\xff\xff\xff"))
    finally:
        state.close()


def restore(
    workdir: Path, stores: dict[str, CheckpointStorage], n: int, keys: int, rounds: int
) -> dict[str, Any]:
    """Checkpoint ``n`` into an empty directory from each store in turn."""
    seconds: dict[str, list[float]] = {kind: [] for kind in stores}
    for r in range(rounds):
        kinds = list(stores) if r % 2 == 0 else list(reversed(stores))
        for kind in kinds:
            target = workdir / f"restore-{kind}-{r}" / "db"
            seconds[kind].append(_restore_once(stores[kind], n, target, _key(keys - 1)))
            if r == 0 and _count(target) != keys:
                raise RuntimeError(f"restore from {kind} did not hold {keys} keys")
            shutil.rmtree(target.parent)
    meta = stores["s3"].metadata(n)
    return {
        "keys": keys,
        "checkpoint_bytes": meta["size"],
        "files": len(meta["workers"][0]["files"]),
        **{f"{kind}_s": [round(x, 3) for x in xs] for kind, xs in seconds.items()},
        **{f"{kind}_median_s": _median(xs) for kind, xs in seconds.items()},
        "s3_over_local_median": _median(
            [s / loc for s, loc in zip(seconds["s3"], seconds["local"], strict=True)]
        ),
    }


def state_sections(
    workdir: Path, server: S3Server, keys: int, updates: int, rounds: int
) -> dict[str, Any]:
    """Sections 2 and 3: the checkpoints written to S3, then copied to a directory (the
    ``weir savepoint --into`` path) so both restores read the same files."""
    s3 = CheckpointStorage(server.url("state"), "bigstate")
    local = CheckpointStorage(workdir / "local-checkpoints", "bigstate")
    local.ensure()
    inc = incremental(workdir, s3, keys, 0.01, updates)
    n = inc["last_checkpoint"]
    s3.export(n, local, workdir / "export-scratch")
    return {
        "incremental": inc,
        "restore": restore(workdir, {"local": local, "s3": s3}, n, keys, rounds),
    }


def measure(
    workdir: Path, job_file: Path, rounds: int = 7, keys: int = 1_000_000, updates: int = 8
) -> dict[str, Any]:
    """Every section; ``job_file``: the checkpoint benchmark's job (``bench.py``'s
    ``write_parallel_inputs``)."""
    out: dict[str, Any] = {"seconds": {}}
    with s3_server(workdir) as server:
        t0 = time.monotonic()
        out["throughput"] = throughput(job_file, workdir, server, rounds)
        out["seconds"]["throughput"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        out.update(state_sections(workdir, server, keys, updates, rounds))
        out["seconds"]["incremental_and_restore"] = round(time.monotonic() - t0, 1)
    return out


def main() -> None:
    from benchmarks.bench import write_parallel_inputs

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="throughput input")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in state")
    parser.add_argument("--updates", type=int, default=8, help="1%% update checkpoints")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="weir-s3-bench-"))
    try:
        job_file = write_parallel_inputs(workdir, args.events, 10_000)
        print("s3 bench: throughput, incremental, restore…", file=sys.stderr, flush=True)
        result = {
            "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
            **measure(workdir, job_file, args.rounds, args.keys, args.updates),
        }
        # the host is shared: the load says how noisy the figures above are
        result["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    (args.out / "s3-bench.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
