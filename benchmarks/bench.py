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
   0, 1, 5, 10, 50 and 100 ms (Flink's latency/throughput figure).
6. ``checkpoints``: throughput with checkpoints every 1 s against none, the synchronous part
   with state growing to 1M keys, recovery time (``benchmarks/checkpoint_bench.py``).
7. ``s3_checkpoints``: checkpoints to S3 (SeaweedFS on loopback) beside a local directory:
   throughput with 1 s checkpoints, the upload after 1% of 1M keys changed, the restore of 1M
   keys into an empty directory (``s3_bench.py``; ``make bench-s3`` runs it alone).
8. ``kafka``: weir's expression and lambda jobs at p=1 over a Kafka topic against the bare
   confluent-kafka consumer, per CPU-second and per second, start-up not counted
   (``kafka_bench.py``).
9. ``queries``: point lookups with wrk beside a bare FastAPI + rocksdict endpoint, then the
   mixed query load (``query_bench.py``).
10. ``peers``: weir beside Quix Streams on the same Kafka topics, 10k and 1M keys
   (``peer_bench.py``).
11. ``cluster``: cluster mode (``--master spark://…``) on a two-worker standalone Spark cluster
   on this host beside local p=2: throughput, query latency through the driver, freshness and
   recovery after an executor loss (``cluster_bench.py``; ``make bench-cluster`` runs it alone).
12. ``joins``: a window join and an interval join of the ad stream's impressions and clicks at
   parallelism 1 and 2 (``join_bench.py``).
13. ``cep``: a three-step CEP pattern (impression, impression, click within 10 s) over the
   ad stream at parallelism 1 and 2 (``cep_bench.py``).
14. ``cpu``: events per CPU-second of the whole process tree on the peer workload, weir (lambda
   and SQL jobs, p=1 and p=2) beside DuckDB's one-thread aggregate and PyFlink's SQL job, with
   the columnar loop prototype's figure (``cpu_bench.py``; ``make bench-cpu`` runs it alone).
15. ``sql``: a continuous aggregate view and a SQL interval join at parallelism 1 and 2, and
   pull-query latency under ingest with the executor comparison (``sql_bench.py``).

``--only`` runs some sections. The figures (``benchmarks/plots.py``) and ``bench.json`` go to
``--out``; ``seconds`` in the JSON times each section. Each figure is then printed beside the
one kept from ``main`` (``benchmarks/results/bench.json``, or ``--kept``) with its ratio, and
flagged when worse by more than ``--gate-threshold``; the table is ``gate`` in the JSON
(``benchmarks/gate.py``; ``--no-gate`` skips it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import (
    cep_bench,
    checkpoint_bench,
    cluster_bench,
    cpu_bench,
    freshness,
    gate,
    join_bench,
    kafka_bench,
    peer_bench,
    plots,
    query_bench,
    s3_bench,
    serving_cost,
    sql_bench,
)
from benchmarks.runs import timed_run
from tests.support.workloads import write_ads
from weir.engine.runtime import gctuning
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.loader import load_configured_job
from weir.engine.runtime.messages import FROM_WORKER, TO_WORKER, Finished, ManagerLink, Stop
from weir.engine.runtime.task.worker import Worker

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
from weir import Job, WatermarkStrategy, agg, sources, windows
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
    t0 = time.perf_counter()
    worker = finished_worker(job_file, state_dir)
    seconds = time.perf_counter() - t0
    op = worker.keyed.ops["stats"]
    return {
        "events": worker.sources.records_in,
        "seconds": round(seconds, 3),
        "events_per_s": round(worker.sources.records_in / seconds),
        "windows_fired": op.results_out,
    }


def finished_worker(job_file: Path, state_dir: Path, status_interval_ms: int = 0) -> Worker:
    """One worker of ``job_file`` run in this process with its real loop until its input ends
    (``status_interval_ms``: 0 keeps the default)."""
    cfg = RunConfig(job_file=job_file, state_dir=state_dir)
    facts = RunFacts()
    if status_interval_ms:
        facts = replace(facts, status_interval_ms=status_interval_ms)
    job = load_configured_job(cfg)
    parent, child = mp.Pipe()
    worker = Worker(cfg, 0, ManagerLink(child), job, facts=facts)

    def stop_when_finished() -> None:
        while True:
            if isinstance(FROM_WORKER.decode(parent.recv_bytes()), Finished):
                parent.send_bytes(TO_WORKER.encode(Stop()))
                return

    threading.Thread(target=stop_when_finished, daemon=True).start()
    with gctuning.tuned():  # as main.run_worker runs it
        worker.run()
    return worker


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


def write_parallel_inputs(workdir: Path, events: int, keys: int) -> Path:
    """Two JSONL files (two splits) and the job reading them, shared by several sections."""
    step = 10_000 / (keys * 10)
    for i in range(2):
        write_ads(workdir / f"part-{i}.jsonl", events // 2, keys, step_ms=step * 2, seed=100 + i)
    job_file = workdir / "parallel_job.py"
    job_file.write_text(JOB.format(path=str(workdir / "part-*.jsonl"), window=TUMBLING))
    return job_file


def parallel(workdir: Path, events: int, keys: int) -> dict[str, Any]:
    """Parallelism 1 and 2 on the same two files, measured one after the other in this run."""
    job_file = write_parallel_inputs(workdir, events, keys)
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


def buffer_sweep(workdir: Path, events: int, keys: int, rate: int) -> list[dict[str, Any]]:
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
    return rows


SECTIONS = (
    "single_worker", "parallel", "serving_cost", "freshness", "buffer_timeout", "checkpoints",
    "s3_checkpoints", "kafka", "queries", "peers", "cluster", "joins", "cep", "cpu", "sql",
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=5_000, help="events/s for freshness runs")
    parser.add_argument(
        "--peer-events", type=int, default=peer_bench.EVENTS, help="per peer workload"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}"
    )
    parser.add_argument(
        "--kept", type=Path, default=gate.KEPT, help="the bench JSON of main, to compare with"
    )
    parser.add_argument(
        "--gate-threshold",
        type=gate.threshold_arg,
        default=gate.DEFAULT_THRESHOLD,
        help="flag a figure worse than the kept one by more than this (0.1 or 10%%)",
    )
    parser.add_argument("--no-gate", action="store_true", help="no comparison with --kept")
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"--only: unknown sections {unknown}; use some of {', '.join(SECTIONS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-"))
    parallel_job = workdir / "parallel_job.py"
    runs: dict[str, Any] = {
        "single_worker": lambda: throughput(workdir, args.events, args.keys),
        "parallel": lambda: parallel(workdir, args.events, args.keys),
        "serving_cost": lambda: serving_cost.measure(parallel_job, workdir, args.keys),
        "freshness": lambda: freshness.measure(
            workdir, rate=args.rate, parallelism=2, buffer_timeout_ms=DEFAULT_BUFFER_TIMEOUT_MS
        ),
        "buffer_timeout": lambda: buffer_sweep(workdir, args.events // 2, args.keys, args.rate),
        "checkpoints": lambda: checkpoint_bench.measure(parallel_job, workdir),
        "s3_checkpoints": lambda: s3_bench.measure(workdir, parallel_job),
        "kafka": lambda: kafka_bench.measure(workdir),
        "queries": lambda: query_bench.measure(workdir),
        "peers": lambda: peer_bench.measure(workdir, args.peer_events),
        "cluster": lambda: cluster_bench.run(workdir / "cluster"),
        "joins": lambda: join_bench.measure(workdir),
        "cep": lambda: cep_bench.measure(workdir),
        "cpu": lambda: cpu_bench.measure(workdir, args.peer_events),
        "sql": lambda: sql_bench.measure(workdir),
    }
    result: dict[str, Any] = {
        "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
        "seconds": {},
    }
    started = time.monotonic()
    try:
        for name in SECTIONS:
            if name not in only:
                continue
            if not parallel_job.exists() and name in ("serving_cost", "buffer_timeout",
                                                      "checkpoints", "s3_checkpoints"):  # fmt: skip
                write_parallel_inputs(workdir, args.events, args.keys)
            print(f"bench: {name}…", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            result[name] = runs[name]()
            result["seconds"][name] = round(time.monotonic() - t0, 1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["seconds"]["total"] = round(time.monotonic() - started, 1)
    result["plots"] = plots.write_all(result, args.out)
    if not args.no_gate:
        result["gate"] = gate.gate(args.kept, result, args.gate_threshold)
    text = json.dumps(result, indent=2)
    print(text)
    (args.out / "bench.json").write_text(text + "\n")
    if "gate" in result:  # last, where a run in a terminal ends
        print(gate.render(result["gate"]), file=sys.stderr)


if __name__ == "__main__":
    main()
