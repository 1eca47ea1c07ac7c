"""Point lookups over a running job's life (decision 0022, "Later"): the query benchmark's job
(``benchmarks.query_bench``'s ``JOB``: 2,000 ids, 2,000 events/s, 10 s tumbling windows) and
its ``wrk`` load, one round every ``--every`` seconds for ``--seconds``, from the first answer.

    python -m benchmarks.query_age [--seconds 600] [--every 10] [--round 5]

The query benchmark measures a job 60 s old; what a lookup steps over (the dead entries of the
worker's cell merges, until a garbage flush) depends on how long the job has run, so a rate
that holds at 60 s can fall later. Prints JSON: each round's age, requests/s and p99, the
workers' CPU, flushes and compactions so far (from their RocksDB LOGs), and the mean rate over
0-120 s, 120-300 s, 300-600 s and past 600 s of age."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.query_bench import JOB, PATH, _wait_for, _wrk
from benchmarks.runs import serving
from tests.support.procs import cpu_seconds, weir_run_pid, worker_pids

SPANS = ((0, 120), (120, 300), (300, 600), (600, None))


def rocksdb_events(state_dir: Path) -> dict[str, int]:
    """Flushes and compactions the workers' RocksDB instances started, from their LOGs."""
    found = {"flushes": 0, "compactions": 0}
    for log in state_dir.glob("*/worker-*/db/LOG*"):
        text = log.read_text(errors="replace")
        found["flushes"] += text.count('"event": "flush_started"')
        found["compactions"] += text.count('"event": "compaction_started"')
    return found


def span_means(rounds: list[dict[str, Any]]) -> dict[str, int]:
    """The mean requests/s of the rounds that started in each span of age (``SPANS``)."""
    out = {}
    for lo, hi in SPANS:
        rates = [
            r["requests_per_s"]
            for r in rounds
            if r["age_s"] >= lo and (hi is None or r["age_s"] < hi)
        ]
        if rates:
            out[f"{lo}-{hi or ''}s"] = round(sum(rates) / len(rates))
    return out


def measure(seconds: float, every: float, round_s: float, connections: int = 50) -> dict[str, Any]:
    """Rounds of ``round_s`` seconds, one every ``every``, for ``seconds`` of the job's life."""
    workdir = Path(tempfile.mkdtemp(prefix="weir-query-age-"))
    job = workdir / "qbench_job.py"
    job.write_text(JOB)
    state = workdir / "state"
    rounds: list[dict[str, Any]] = []
    with serving(job, state) as url:
        _wait_for(f"{url}/qbench/stats/state/ad-1", "weir")
        workers = worker_pids(weir_run_pid(job))
        start, cpu_at_start = time.monotonic(), cpu_seconds(workers)
        while time.monotonic() - start < seconds:
            begun = time.monotonic()
            found = _wrk(url, PATH, workdir, round_s, connections)
            rounds.append(
                {
                    "age_s": round(begun - start),
                    "requests_per_s": found["requests_per_s"],
                    "p99_ms": found["p99_ms"],
                    "workers_cpu_s": round(cpu_seconds(workers) - cpu_at_start, 1),
                    **rocksdb_events(state),
                }
            )
            print(f"query_age: {rounds[-1]}", file=sys.stderr, flush=True)
            time.sleep(max(0.0, every - (time.monotonic() - begun)))
    return {"rounds": rounds, "mean_requests_per_s": span_means(rounds)}


def main() -> None:
    """The command line: ``measure`` with its flags, JSON on stdout, each round on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="of the job's life")
    parser.add_argument("--every", type=float, default=10.0, help="seconds from round to round")
    parser.add_argument("--round", type=float, default=5.0, help="seconds of wrk a round")
    args = parser.parse_args()
    print(json.dumps(measure(args.seconds, args.every, args.round), indent=2))


if __name__ == "__main__":
    main()
