"""``make bench-backfill``: the Spark backfill beside a bare Spark window aggregation, on the same
generated events, in one Spark session. Bare: ``spark.read.json`` with the schema ->
``groupBy(id, window)`` -> count + sum -> Parquet. weir: ``run_backfill`` of the same job (its
chain per file in Python, native aggregation, one SST per key group). Goal: weir >= 0.7 of bare
events/s.

``python -m benchmarks.backfill_bench [EVENTS] [FILES] [--rounds N]`` (defaults: 10,000,000 events
in 4 files, 10k keys, about 10 events per key and window; ``local[2]``; 1 round).

Both sides run in one session, after a small warm-up of each (the JVM's JIT and the Python
workers start once, for neither side's account), and alternate ``--rounds`` times; the figures
are each side's median, with the CPU seconds the JVM and the Python workers used (read from
``/proc`` around each run: on a loaded host they move less than the wall-clock times)."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.procs import children
from tests.support.workloads import write_ads
from weir.engine.spark.backfill import run_backfill, spark_session

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("bfbench")
(
    job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", n=agg.count(), total=agg.sum("value"))
)
"""
WARM_UP_EVENTS = 200_000


def bare_spark(spark: Any, files: list[str], out: Path) -> None:
    """The fastest plain Spark job for the same windows: the native JSON reader with the schema
    given (no inference pass), built-in aggregates, Parquet out."""
    from pyspark.sql import functions as F

    df = spark.read.schema("id string, event string, ts long, value long").json(files)
    (
        df.groupBy("id", (F.col("ts") - F.pmod("ts", F.lit(10_000))).alias("start"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
        .write.mode("overwrite")
        .parquet(str(out))
    )


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of ``pid``'s descendants so far, as ``jvm`` (Spark) and ``python`` (its
    Python daemons and workers, with the finished workers they reaped)."""
    from tests.support.procs import _TICK

    found = {"jvm": 0.0, "python": 0.0}
    todo = list(children(pid))
    while todo:
        p = todo.pop()
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
            fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
            todo.extend(children(p))
        except OSError:
            continue
        prog = Path(cmd.split(b"\0")[0].decode(errors="replace")).name
        kind = "jvm" if prog == "java" else "python" if prog.startswith("python") else None
        if kind is None:
            continue
        found[kind] += sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
    return found


def timed(run: Callable[[], Any]) -> dict[str, float]:
    import os

    before, t0 = tree_cpu(os.getpid()), time.monotonic()
    run()
    wall, after = time.monotonic() - t0, tree_cpu(os.getpid())
    return {"s": round(wall, 3), **{f"{k}_cpu_s": round(after[k] - before[k], 2) for k in after}}


def measure(
    workdir: Path, events: int = 10_000_000, files: int = 4, master: str = "local[2]",
    rounds: int = 1,
) -> dict[str, Any]:  # fmt: skip
    paths = [
        _events(workdir / f"history-{i}.jsonl", events // files, i, files) for i in range(files)
    ]
    warm = [_events(workdir / "warm-up.jsonl", WARM_UP_EVENTS, 99)]
    job = workdir / "bfbench_job.py"
    job.write_text(JOB)
    spark = spark_session(master, "backfill-bench")
    spark.sparkContext.setLogLevel("ERROR")

    def weir(inputs: list[str]) -> None:
        run_backfill(job, inputs, workdir / "backfill", master=master, progress=False,
                     session=spark)  # fmt: skip

    try:
        bare_spark(spark, warm, workdir / "bare.parquet")
        weir(warm)
        runs: dict[str, list[dict[str, float]]] = {"bare": [], "weir": []}
        for _ in range(rounds):
            runs["bare"].append(timed(lambda: bare_spark(spark, paths, workdir / "bare.parquet")))
            runs["weir"].append(timed(lambda: weir(paths)))
    finally:
        spark.stop()
    bare_s = statistics.median(r["s"] for r in runs["bare"])
    weir_s = statistics.median(r["s"] for r in runs["weir"])
    return {
        "events": events,
        "files": files,
        "master": master,
        "rounds": rounds,
        "bare_spark_events_per_s": round(events / bare_s),
        "weir_backfill_events_per_s": round(events / weir_s),
        "weir_over_bare": round(bare_s / weir_s, 2),
        "per_round_ratio": [
            round(b["s"] / w["s"], 2) for b, w in zip(runs["bare"], runs["weir"], strict=True)
        ],
        "runs": runs,
    }


def _events(path: Path, n: int, i: int, files: int = 4) -> str:
    # dense: 10k keys, about 10 events per key and 10 s window (files interleave in time)
    write_ads(path, n, 10_000, step_ms=0.1 * files, seed=200 + i)
    return str(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backfill_bench")
    parser.add_argument("events", nargs="?", type=int, default=10_000_000)
    parser.add_argument("files", nargs="?", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    a = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="weir-backfill-bench-"))
    try:
        print(json.dumps(measure(work, a.events, a.files, a.master, a.rounds), indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
