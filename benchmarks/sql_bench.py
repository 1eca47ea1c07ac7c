"""``make bench``'s ``sql`` section (issue 43): SQL views beyond windows, and pull queries.

1. ``continuous_aggregate`` and ``interval_join``: throughput of a continuous aggregate view
   (``GROUP BY id`` without a window: COUNT, SUM, MAX per id) and of a SQL interval join (each
   click with the impressions of the 10 s before it, as ``join_bench``'s job-API join) at
   parallelism 1 and 2, the same job manager and spawned workers as ``weir run``, over
   ``join_bench``'s two files of ad events. Each parallelism runs twice, interleaved; the better
   run counts (the host is shared).
2. ``pull_queries``: latency of ``POST /{job}/sql`` while the job ingests (a generator at
   ``rate`` events/s over 10k ids, parallelism 2): a point query of two keys, a prefix listing
   with a filter, a full ``ORDER BY … LIMIT 10`` and a full aggregate (10k keys, budget 10k),
   p50 and p99 of ``rounds`` requests each, twice, interleaved, beside the baseline of the point
   query: the same two keys read by two ``GET /{job}/totals/state/{key}``.
3. ``executor``: what a DuckDB executor would add to the full aggregate: the rows a query reads
   (``SELECT key, n, total``, the same read path) fetched, then ``COUNT``/``SUM`` in DuckDB over
   an Arrow table of them, beside weir's own compiler answering the aggregate itself. The read
   dominates both; DuckDB's share is what it would add (``docs/decisions/0011-pull-queries.md``).

``python -m benchmarks.sql_bench`` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.join_bench import write_inputs
from benchmarks.runs import serving, timed_run

JOB = """
from weir import Job, WatermarkStrategy, sources

job = Job("sql-bench")
ads = job.source(sources.jsonl({path!r}), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
{view}
"""
CONTINUOUS = (
    'job.sql("totals", "SELECT id, COUNT(*) AS n, SUM(`value`) AS total, MAX(`value`) AS top '
    'FROM ads GROUP BY id", tables={"ads": ads}, state_ttl_ms=0)'
)
INTERVAL_JOIN = (
    'job.sql("joined", "SELECT c.id AS id, i.ts AS shown, c.ts AS clicked FROM ads AS c '
    "JOIN ads AS i ON c.id = i.id AND i.ts BETWEEN c.ts - INTERVAL '10' SECOND AND c.ts "
    "WHERE c.event = 'click' AND i.event = 'impression'\", tables={\"ads\": ads})"
)
VIEWS = {"continuous_aggregate": CONTINUOUS, "interval_join": INTERVAL_JOIN}
LIVE_JOB = """
from weir import Job, WatermarkStrategy, sources

job = Job("pull-bench")
ads = job.source(sources.generator("ads", rate={rate}, ids={keys}, skew=0.5),
                 timestamp="ts", watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
job.sql("totals", "SELECT id, COUNT(*) AS n, SUM(`value`) AS total FROM ads GROUP BY id",
        tables={{"ads": ads}}, state_ttl_ms=0)
"""
QUERIES = {
    "point_2_keys": "SELECT key, n, total FROM totals WHERE key IN ('ad-1', 'ad-2')",
    "prefix_filter": "SELECT key, n FROM totals WHERE key LIKE 'ad-99%' AND n > 1",
    "order_limit_10": "SELECT key, n FROM totals ORDER BY n DESC LIMIT 10",
    "aggregate_all": "SELECT COUNT(*) AS keys, SUM(n) AS events FROM totals",
}


def throughput(workdir: Path, events: int, keys: int) -> dict[str, Any]:
    """Each SQL view at parallelism 1 and 2 (the better of two interleaved runs each)."""
    pattern = write_inputs(workdir, events, keys)
    out: dict[str, Any] = {}
    for kind, view in VIEWS.items():
        job_file = workdir / f"sql_{kind}_job.py"
        job_file.write_text(JOB.format(path=str(pattern), view=view))
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for round_ in range(2):
            for p in (1, 2):
                run = timed_run(job_file, workdir / f"state-sql-{kind}-p{p}-{round_}", p)
                run.pop("backpressure", None)
                runs[p].append(run)
        best = {p: max(rs, key=lambda r: r["events_per_s"]) for p, rs in runs.items()}
        out[kind] = {
            "p1": best[1],
            "p2": best[2],
            "p2_over_p1": round(best[2]["events_per_s"] / best[1]["events_per_s"], 2),
        }
    return out


def _timed(client: httpx.Client, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    r = client.post("/pull-bench/sql", json=body)
    elapsed = (time.perf_counter() - start) * 1000
    r.raise_for_status()
    answer: dict[str, Any] = r.json()
    return elapsed, answer


def _gets(client: httpx.Client, rounds: int) -> list[float]:
    """The baseline of ``point_2_keys``: the same two keys by ``GET …/state/{key}``."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for key in ("ad-1", "ad-2"):
            client.get(f"/pull-bench/totals/state/{key}").raise_for_status()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 2),
    }


def pull_queries(workdir: Path, rate: int, keys: int, rounds: int) -> dict[str, Any]:
    """Latency of each query under ingest, and the executor comparison."""
    import duckdb
    import pyarrow as pa  # type: ignore[import-untyped]

    job_file = workdir / "pull_job.py"
    job_file.write_text(LIVE_JOB.format(rate=rate, keys=keys))
    out: dict[str, Any] = {"ingest_events_per_s": rate, "keys": keys}
    with serving(job_file, workdir / "state-pull", "--parallelism", "2") as url:
        with httpx.Client(base_url=url, timeout=60.0, trust_env=False) as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # every key seen once, or the scans are short
                r = client.post("/pull-bench/sql", json={"query": QUERIES["aggregate_all"],
                                                         "budget": 10_000})  # fmt: skip
                if r.status_code == 200 and r.json()["rows"][0]["keys"] >= keys * 0.95:
                    break
                time.sleep(0.5)  # 503 while the workers create their state
            for _ in range(2):  # interleaved: the host is shared and drifts
                for name, query in QUERIES.items():
                    body = {"query": query, "budget": 10_000}
                    ms = [_timed(client, body)[0] for _ in range(rounds)]
                    out.setdefault(name, []).extend(ms)
                out.setdefault("get_state_2_keys", []).extend(_gets(client, rounds))
            for name in [*QUERIES, "get_state_2_keys"]:
                out[name] = _quantiles(out[name])
            out["executor"] = _executor(client, rounds, duckdb, pa)
    return out


def _executor(client: httpx.Client, rounds: int, duckdb: Any, pa: Any) -> dict[str, Any]:
    """The full aggregate answered by weir's compiler, against reading the rows it needs and
    aggregating them in DuckDB over Arrow (one connection, reused, as a server would)."""
    con = duckdb.connect()
    own, read, duck = [], [], []
    for _ in range(rounds):
        own.append(_timed(client, {"query": QUERIES["aggregate_all"], "budget": 10_000})[0])
        ms, answer = _timed(client, {"query": "SELECT key, n, total FROM totals", "budget": 10_000})
        read.append(ms)
        start = time.perf_counter()
        table = pa.Table.from_pylist(answer["rows"])
        con.register("totals", table)
        con.execute("SELECT COUNT(*), SUM(n) FROM totals").fetchall()
        con.unregister("totals")
        duck.append((time.perf_counter() - start) * 1000)
    return {
        "own_compiler_aggregate": _quantiles(own),
        "read_rows_for_duckdb": _quantiles(read),
        "duckdb_arrow_and_query": _quantiles(duck),
    }


def measure(workdir: Path, events: int = 400_000, keys: int = 10_000, rate: int = 2_000,
            rounds: int = 50) -> dict[str, Any]:  # fmt: skip
    """The section's figures (see the module docstring)."""
    return {
        "throughput": throughput(workdir, events, keys),
        "pull_queries": pull_queries(workdir, rate, keys, rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--only", choices=("throughput", "pull_queries"), default=None)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="weir-sql-bench-"))
    try:
        if args.only == "throughput":
            result: Any = throughput(workdir, args.events, args.keys)
        elif args.only == "pull_queries":
            result = pull_queries(workdir, args.rate, args.keys, args.rounds)
        else:
            result = measure(workdir, args.events, args.keys, args.rate, args.rounds)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
