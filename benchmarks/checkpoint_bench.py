"""Checkpoint costs, measured side by side in one run (issue 6):

- throughput of the same bounded job with a checkpoint every second and with none (interleaved
  rounds, best of each; goal: ratio >= 0.9);
- the synchronous phase (the operators' unwritten state frozen at the barrier, while the
  worker's loop waits; the write to RocksDB and RocksDB's checkpoint follow on the state
  writer's thread) with 1M keys of state, p50/p99 over every checkpoint of the run (goal: p99
  <= 50 ms);
- recovery: a worker killed with SIGKILL, to the first record processed again by every worker
  after the restart from the latest checkpoint.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.runs import serving, timed_run
from tests.support.procs import weir_run_pid, worker_pids

BIG_STATE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("bigstate")
(
    job.source(sources.generator("ads", rate=0, ids={keys}, skew=0, count={count},
                                 clock="synthetic", step={step}),
               timestamp="ts", watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=60_000))
    .aggregate("stats", n=agg.count(), total=agg.sum("value"))
)
"""

LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("recover")
(
    job.source(sources.generator("ads", rate=20_000, ids=10_000), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=500))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count(), total=agg.sum("value"))
)
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def throughput_ratio(job_file: Path, workdir: Path, rounds: int = 2) -> dict[str, Any]:
    """The same bounded run with checkpoints every 1 s and without, interleaved."""
    runs: dict[str, list[dict[str, Any]]] = {"none": [], "every_1s": []}
    for r in range(rounds):
        runs["none"].append(timed_run(job_file, workdir / f"cp-none-{r}", 2))
        runs["every_1s"].append(
            timed_run(
                job_file,
                workdir / f"cp-1s-{r}",
                2,
                checkpoint_interval_ms=1000,
                checkpoint_dir=workdir / f"cp-store-{r}",
            )
        )
    best = {k: max(v, key=lambda x: x["events_per_s"]) for k, v in runs.items()}
    taken = best["every_1s"].get("checkpoints", [])
    return {
        "events": best["none"]["events"],
        "no_checkpoints_events_per_s": best["none"]["events_per_s"],
        "checkpoint_1s_events_per_s": best["every_1s"]["events_per_s"],
        "ratio": round(best["every_1s"]["events_per_s"] / best["none"]["events_per_s"], 3),
        "checkpoints_taken": len(taken),
    }


def sync_phase(workdir: Path, keys: int = 1_000_000, count: int = 2_000_000) -> dict[str, Any]:
    """One worker, every event a new (key, window) until 1M keys are in state."""
    job_file = workdir / "bigstate_job.py"
    job_file.write_text(BIG_STATE_JOB.format(keys=keys, count=count, step=60_000 / keys))
    run = timed_run(
        job_file,
        workdir / "cp-big",
        1,
        checkpoint_interval_ms=500,
        checkpoint_dir=workdir / "cp-big-store",
        checkpoints_retained=2,
    )
    taken = run.get("checkpoints", [])
    sync = [c["sync_ms"] for c in taken]
    if not sync:
        return {"error": "no checkpoint completed during the run", "run": run}
    return {
        "keys": keys,
        "events": run["events"],
        "checkpoints": len(sync),
        "sync_p50_ms": _pct(sync, 0.5),
        "sync_p99_ms": _pct(sync, 0.99),
        "sync_max_ms": round(max(sync), 2),
        "async_p50_ms": _pct([c["async_ms"] for c in taken], 0.5),
        "largest_checkpoint_bytes": max(c["size"] for c in taken),
        "median_incremental_bytes": int(statistics.median(c["incremental_size"] for c in taken)),
        "each": [
            {k: c[k] for k in ("id", "sync_ms", "async_ms", "size", "incremental_size")}
            for c in taken
        ],
    }


def recovery(workdir: Path) -> dict[str, Any]:
    job_file = workdir / "recover_job.py"
    job_file.write_text(LIVE_JOB)
    args = ("--parallelism", "2", "--checkpoint-interval-ms", "1000", "--restart-delay-ms", "0")
    with (
        serving(job_file, workdir / "cp-recover", *args) as url,
        httpx.Client(base_url=url, timeout=10, trust_env=False) as client,
    ):
        deadline = time.monotonic() + 60
        while (client.get("/jobs/recover").json().get("last_checkpoint") or 0) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("no checkpoint within 60 s")
            time.sleep(0.1)
        pids = worker_pids(weir_run_pid(job_file))
        killed_at = time.time()
        os.kill(pids[-1], signal.SIGKILL)
        while True:
            body = client.get("/jobs/recover").json()
            firsts = [w.get("first_record_at") or 0 for w in body["workers"]]
            if body.get("restarts") == 1 and all(f > killed_at for f in firsts):
                break
            if time.monotonic() > deadline + 60:
                raise RuntimeError(f"no recovery within the deadline: {body}")
            time.sleep(0.02)
    return {
        "restart_delay_ms": 0,
        "kill_to_first_record_ms": round((min(firsts) - killed_at) * 1000),
        "kill_to_all_workers_processing_ms": round((max(firsts) - killed_at) * 1000),
    }


def measure(parallel_job: Path, workdir: Path) -> dict[str, Any]:
    return {
        "throughput": throughput_ratio(parallel_job, workdir),
        "sync_phase_1m_keys": sync_phase(workdir),
        "recovery": recovery(workdir),
    }


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    from benchmarks.bench import JOB, TUMBLING
    from tests.support.workloads import write_ads

    work = Path(tempfile.mkdtemp(prefix="weir-cp-bench-"))
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    for i in range(2):
        write_ads(work / f"part-{i}.jsonl", events // 2, 10_000, step_ms=0.2, seed=100 + i)
    job = work / "parallel_job.py"
    job.write_text(JOB.format(path=str(work / "part-*.jsonl"), window=TUMBLING))
    print(json.dumps(measure(job, work), indent=2))
