"""``make bench``: the benchmark suite, printed as JSON (and written with plots to ``--out``).

1. ``single_worker``: JSONL file -> filter -> key_by -> tumbling 10 s count+sum -> RocksDB, one
   worker, 1M events over 10k keys, at two event-time densities side by side: ``dense`` (10
   events per key and window, an ad stream of 10k events/s) and ``sparse`` (about one event per
   key and window, so every event opens a window: the worst case). The worker runs in this
   process with its real loop (``Worker.run``), so start-up is not timed.
2. ``parallel``: the same job over two input files (two splits) with spawned workers at
   parallelism 1 and 2 in the same run; the ratio is the scaling figure.
3. ``serving_cost``: throughput of a ``weir run`` with and without concurrent HTTP queries
   (4 clients as fast as they go); the ratio is what serving costs processing.
4. ``freshness``: event handed to the source -> visible in an HTTP query, p50/p99, at the
   default buffer timeout.
5. ``buffer_timeout``: throughput and freshness p99 against exchange buffer timeouts of
   0, 1, 5, 10, 50 and 100 ms (Flink's latency/throughput figure), plotted to a PNG.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from engine.runtime.config import RunConfig
from engine.runtime.loader import load_configured_job
from engine.runtime.worker import Worker
from loadtest import checkpoint_bench, freshness, kafka_bench, query_bench, serving_cost
from loadtest.runs import timed_run
from loadtest.workloads import write_ads

BUFFER_TIMEOUTS = (0, 1, 5, 10, 50, 100)
DEFAULT_BUFFER_TIMEOUT_MS = RunConfig(job_file=Path("-")).buffer_timeout_ms


def _spin(n: int) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i % 7
    return time.perf_counter() - t0


def parallel_capacity(n: int = 5_000_000) -> float:
    """How much faster this machine runs two CPU-bound Python processes than one, right now
    (shared hosts vary from ~1.1 to ~2.0): the ceiling for any p2/p1 figure in the same run."""
    one = _spin(n)
    with mp.get_context("spawn").Pool(2) as pool:
        t0 = time.perf_counter()
        pool.map(_spin, [n, n])
        two = time.perf_counter() - t0
    return round(2 * one / two, 2)


JOB = """
from engine import Job, WatermarkStrategy, agg, sources, windows
job = Job("bench")
(
    job.source(sources.jsonl({path!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .filter(lambda e: e["event"] == "impression")
    .key_by("id")
    .window({window})
    .aggregate("stats", count=agg.count(), total=agg.sum("value"))
)
"""
TUMBLING = "windows.tumbling(ms=10_000)"
SLIDING = "windows.sliding(size_ms=10_000, slide_ms=2_000)"


def run_worker(job_file: Path, state_dir: Path) -> dict[str, Any]:
    cfg = RunConfig(job_file=job_file, state_dir=state_dir)
    job = load_configured_job(cfg)
    parent, child = mp.Pipe()
    worker = Worker(cfg, 0, child, job)

    def stop_when_finished() -> None:
        while True:
            kind, _ = parent.recv()
            if kind == "finished":
                parent.send("stop")
                return

    threading.Thread(target=stop_when_finished, daemon=True).start()
    t0 = time.perf_counter()
    worker.run()
    seconds = time.perf_counter() - t0
    op = worker.ops["stats"]
    return {
        "events": worker.chain.records_in,
        "seconds": round(seconds, 3),
        "events_per_s": round(worker.chain.records_in / seconds),
        "windows_fired": op.results_out,
    }


def throughput(workdir: Path, events: int, keys: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # dense: 10k keys x 10 events per 10 s window -> 10k events/s of event time
    scenarios = (
        ("dense", 10_000 / (keys * 10), TUMBLING),
        ("sparse", 10_000 / keys, TUMBLING),
        ("sliding_dense", 10_000 / (keys * 10), SLIDING),  # 10 s windows every 2 s: 5 each
    )
    for name, step, window in scenarios:
        data = workdir / f"events-{step:g}.jsonl"  # scenarios with the same step share it
        if not data.exists():
            write_ads(data, events, keys, step_ms=step)
        job_file = workdir / f"{name}_job.py"
        job_file.write_text(JOB.format(path=str(data), window=window))
        out[name] = run_worker(job_file, workdir / f"state-{name}")
        out[name]["events_per_key_window"] = round(10_000 / (step * keys), 2)
    return out


def parallel(workdir: Path, events: int, keys: int) -> dict[str, Any]:
    """Parallelism 1 and 2 on the same two files, measured one after the other in this run."""
    step = 10_000 / (keys * 10)
    for i in range(2):
        write_ads(workdir / f"part-{i}.jsonl", events // 2, keys, step_ms=step * 2, seed=100 + i)
    job_file = workdir / "parallel_job.py"
    job_file.write_text(JOB.format(path=str(workdir / "part-*.jsonl"), window=TUMBLING))
    capacity_before = parallel_capacity()
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for round_ in range(2):  # interleaved, best of two: the host is shared and noisy
        for p in (1, 2):
            runs[p].append(timed_run(job_file, workdir / f"state-p{p}-{round_}", p))
    capacity = round((capacity_before + parallel_capacity()) / 2, 2)
    p1 = max(runs[1], key=lambda r: r["events_per_s"])
    p2 = max(runs[2], key=lambda r: r["events_per_s"])
    ratio = round(p2["events_per_s"] / p1["events_per_s"], 2)
    return {
        "p1": p1,
        "p2": p2,
        "p2_over_p1": ratio,
        "machine_parallel_capacity": capacity,
        "scaling_efficiency": round(ratio / capacity, 2),
    }


def buffer_sweep(
    workdir: Path, events: int, keys: int, rate: int, out: Path
) -> list[dict[str, Any]]:
    job_file = workdir / "parallel_job.py"  # written by parallel()
    rows = []
    for timeout in BUFFER_TIMEOUTS:
        run = timed_run(job_file, workdir / f"state-bt-{timeout}", 2, buffer_timeout_ms=timeout)
        fresh = freshness.measure(workdir, rate=rate, parallelism=2, buffer_timeout_ms=timeout)
        rows.append(
            {
                "buffer_timeout_ms": timeout,
                "events_per_s": run["events_per_s"],
                "freshness_p50_ms": fresh["p50_ms"],
                "freshness_p99_ms": fresh["p99_ms"],
            }
        )
    plot_buffer_sweep(rows, out / "buffer_timeout.png")
    return rows


def plot_buffer_sweep(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["buffer_timeout_ms"] for r in rows]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(xs, [r["events_per_s"] / 1000 for r in rows], "o-", color="tab:blue")
    left.set_xscale("symlog", linthresh=1)
    left.set_xlabel("buffer timeout (ms)")
    left.set_ylabel("throughput, parallelism 2 (k events/s)", color="tab:blue")
    right = left.twinx()
    right.plot(xs, [r["freshness_p99_ms"] for r in rows], "s--", color="tab:red")
    right.set_ylabel("freshness p99 (ms)", color="tab:red")
    left.set_title("weir: throughput and latency against the exchange buffer timeout")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=5_000, help="events/s for freshness runs")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-"))
    try:
        result = {
            "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
            "single_worker": throughput(workdir, args.events, args.keys),
            "parallel": parallel(workdir, args.events, args.keys),
            "serving_cost": serving_cost.measure(workdir / "parallel_job.py", workdir, args.keys),
            "freshness": freshness.measure(
                workdir, rate=args.rate, parallelism=2, buffer_timeout_ms=DEFAULT_BUFFER_TIMEOUT_MS
            ),
            "buffer_timeout": buffer_sweep(
                workdir, args.events // 2, args.keys, args.rate, args.out
            ),
            "checkpoints": checkpoint_bench.measure(workdir / "parallel_job.py", workdir),
            "kafka": kafka_bench.measure(workdir),
            "queries": query_bench.measure(workdir),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    (args.out / "bench.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
