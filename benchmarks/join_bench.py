"""``make bench``'s ``joins`` section: throughput of a window join and an interval join at
parallelism 1 and 2, the same job manager and spawned workers as ``weir run``.

The workload is the ad stream's own join, impressions with clicks of the same ad: two JSONL
files (two splits) of ``--events`` ad events over ``--keys`` ids, 10 events per key and 10 s of
event time, 10% clicks, up to 500 ms of disorder (within the 1 s bound, so no record is late).
Both branches of the one source are filtered and keyed by ``id``; the window join pairs them
in tumbling 10 s windows, the interval join pairs a click with the impressions of the 10 s
before it (``between(-10_000, 0)``). Each pair is made and handed to a function that returns
nothing: the figure is the join's, not a sink's. Each parallelism runs twice, interleaved, and
the better run counts (the host is shared); ``python -m benchmarks.join_bench`` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.runs import timed_run
from tests.support.workloads import write_ads

JOB = """
from weir import Job, WatermarkStrategy, sources, windows

job = Job("join-bench")
ads = job.source(sources.jsonl({path!r}), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
impressions = ads.filter(lambda e: e["event"] == "impression")
clicks = ads.filter(lambda e: e["event"] == "click")
{join}
"""
WINDOW_JOIN = (
    'impressions.join(clicks).where("id").equal_to("id")'
    '.window(windows.tumbling(ms=10_000)).apply(lambda l, r: None, name="joined")'
)
INTERVAL_JOIN = (
    'clicks.key_by("id").interval_join(impressions.key_by("id")).between(-10_000, 0)'
    '.process(lambda l, r, ctx: None, name="joined")'
)
JOINS = {"window_join": WINDOW_JOIN, "interval_join": INTERVAL_JOIN}


def write_inputs(workdir: Path, events: int, keys: int) -> Path:
    """Two files of half the events each (two splits); returns their glob."""
    step = 10_000 / (keys * 10)
    for i in range(2):
        write_ads(workdir / f"join-part-{i}.jsonl", events // 2, keys, step * 2, seed=200 + i)
    return workdir / "join-part-*.jsonl"


def measure(workdir: Path, events: int = 400_000, keys: int = 10_000) -> dict[str, Any]:
    """Each join at parallelism 1 and 2; their ``p2_over_p1``, beside what two processes get
    of this (shared) host right now: the ceiling for any p2/p1 figure."""
    from benchmarks.bench import parallel_capacity  # bench imports this module

    pattern = write_inputs(workdir, events, keys)
    out: dict[str, Any] = {"machine_parallel_capacity": parallel_capacity()}
    for kind, join in JOINS.items():
        job_file = workdir / f"{kind}_job.py"
        job_file.write_text(JOB.format(path=str(pattern), join=join))
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for round_ in range(2):
            for p in (1, 2):
                run = timed_run(job_file, workdir / f"state-{kind}-p{p}-{round_}", p)
                run.pop("backpressure", None)
                runs[p].append(run)
        p1 = max(runs[1], key=lambda r: r["events_per_s"])
        p2 = max(runs[2], key=lambda r: r["events_per_s"])
        out[kind] = {
            "p1": p1,
            "p2": p2,
            "p2_over_p1": round(p2["events_per_s"] / p1["events_per_s"], 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="weir-join-bench-"))
    try:
        print(json.dumps(measure(workdir, args.events, args.keys), indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
