"""``make bench``: throughput of the real worker loop, printed as JSON.

Scenario (issue "Foundation"): JSONL file -> filter -> key_by -> tumbling 10 s count+sum ->
RocksDB, one worker, 1M events over 10k keys. Two event-time densities are measured side by side
in one run: ``dense`` (10 events per key and window, an ad stream of 10k events/s) and ``sparse``
(about one event per key and window, so every event opens a window: the worst case).
The worker runs in this process with its real loop (``Worker.run``), so start-up is not timed.
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
from loadtest.workloads import write_ads

JOB = """
from engine import Job, WatermarkStrategy, agg, sources, windows
job = Job("bench")
(
    job.source(sources.jsonl({path!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .filter(lambda e: e["event"] == "impression")
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", count=agg.count(), total=agg.sum("value"))
)
"""


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
    for name, step in (("dense", 10_000 / (keys * 10)), ("sparse", 10_000 / keys)):
        data = write_ads(workdir / f"{name}.jsonl", events, keys, step_ms=step)
        job_file = workdir / f"{name}_job.py"
        job_file.write_text(JOB.format(path=str(data)))
        out[name] = run_worker(job_file, workdir / f"state-{name}")
        out[name]["events_per_key_window"] = round(10_000 / (step * keys), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-"))
    try:
        result = {
            "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
            "file_tumbling_count_sum_1_worker": throughput(workdir, args.events, args.keys),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
