"""``make bench-backfill``: the Spark backfill beside a bare Spark window aggregation, in one run
on the same generated events (issue 8). Bare: ``spark.read.json`` -> ``groupBy(id, window)`` ->
count + sum -> Parquet. weir: ``run_backfill`` of the same job (its chain per file in Python,
native aggregation, one SST per key group). Goal: weir >= 0.7 of bare events/s.

``python -m loadtest.backfill_bench [EVENTS] [FILES]`` (defaults: 10,000,000 events in 4 files,
10k keys, about 10 events per key and window;
``local[2]``)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loadtest.workloads import write_ads
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


def bare_spark(files: list[str], out: Path, master: str) -> float:
    from pyspark.sql import functions as F

    spark = spark_session(master, "bare-window-aggregation")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.monotonic()
        df = spark.read.schema("id string, event string, ts long, value long").json(files)
        (
            df.groupBy("id", (F.col("ts") - F.pmod("ts", F.lit(10_000))).alias("start"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
            .write.mode("overwrite")
            .parquet(str(out))
        )
        return time.monotonic() - t0
    finally:
        spark.stop()


def measure(
    workdir: Path, events: int = 10_000_000, files: int = 4, master: str = "local[2]"
) -> dict[str, Any]:
    paths = []
    for i in range(files):
        p = workdir / f"history-{i}.jsonl"
        # dense: 10k keys, about 10 events per key and 10 s window
        write_ads(p, events // files, 10_000, step_ms=0.1 * files, seed=200 + i)
        paths.append(str(p))
    job = workdir / "bfbench_job.py"
    job.write_text(JOB)
    bare_s = bare_spark(paths, workdir / "bare.parquet", master)
    result = run_backfill(job, paths, workdir / "backfill", master=master, progress=False)
    return {
        "events": events,
        "files": files,
        "master": master,
        "bare_spark_events_per_s": round(events / bare_s),
        "weir_backfill_events_per_s": round(events / result.compute_seconds),
        "weir_over_bare": round(bare_s / result.compute_seconds, 2),
        "weir_windows": result.windows,
        "seconds_without_spark_start": {
            "bare": round(bare_s, 3),
            "weir": result.compute_seconds,
        },
    }


if __name__ == "__main__":
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    work = Path(tempfile.mkdtemp(prefix="weir-backfill-bench-"))
    try:
        print(json.dumps(measure(work, events, files), indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
