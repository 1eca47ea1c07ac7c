"""End-to-end freshness: how old is the newest event a query can see?

The job keeps ``agg.max("ts")`` per key and window; the generator stamps each event with the wall
clock when it hands it to the source. The source has one split, read by worker 0, and the probe
queries a busy key that another worker owns, so every event it sees crossed the exchange. Each
answer's age is ``now - newest visible ts``: source, chain, exchange buffer, window operator,
state flush, RocksDB secondary catch-up and HTTP, end to end.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.runs import serving
from weir.state.keygroups import key_group, operator_for_key_group

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("fresh")
(
    job.source(sources.generator("ads", rate={rate}, ids=1000, skew=1.2, splits=1),
               timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=60_000))
    .aggregate("seen", count=agg.count(), newest=agg.max("ts"))
)
"""
FIRST_ANSWER_S = 120.0  # a cluster job's Spark application and executors start in ~25 s


def probe_key(parallelism: int, max_parallelism: int = 128) -> str:
    """The most frequent id that a worker other than 0 owns (all of its events are remote)."""
    for i in range(1000):
        key = f"ad-{i}"
        owner = operator_for_key_group(
            max_parallelism, parallelism, key_group(key, max_parallelism)
        )
        if owner != 0 or parallelism == 1:
            return key
    raise ValueError("no id owned by another worker")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def probe(client: httpx.Client, key: str, *, warmup_s: float, seconds: float) -> list[float]:
    """Query ``key`` every 10 ms for ``warmup_s + seconds`` from its first answer with state
    (a cluster's workers start long after its API does); the ages seen after the warm-up."""
    ages: list[float] = []
    start: float | None = None
    deadline = time.monotonic() + FIRST_ANSWER_S
    while start is None or time.monotonic() - start < warmup_s + seconds:
        r = client.get(f"/fresh/seen/state/{key}", params={"limit": 1})
        now_ms = time.time() * 1000
        if r.status_code == 200:
            start = time.monotonic() if start is None else start
            if time.monotonic() - start >= warmup_s:
                ages.append(now_ms - r.json()["windows"][-1]["newest"])
        elif start is None and time.monotonic() > deadline:
            raise RuntimeError(
                f"no query for {key} answered with state within {FIRST_ANSWER_S:.0f} s "
                f"(last: {r.status_code} {r.text[:200]})"
            )
        time.sleep(0.01)
    return ages


def summary(ages: list[float]) -> dict[str, Any]:
    if not ages:
        raise RuntimeError("no query answered with state; the job never became visible")
    return {
        "samples": len(ages),
        "p50_ms": round(statistics.median(ages), 1),
        "p99_ms": round(percentile(ages, 0.99), 1),
    }


def measure(
    workdir: Path,
    *,
    rate: int,
    parallelism: int,
    buffer_timeout_ms: int,
    seconds: float = 4.0,
    warmup_s: float = 1.5,
    extra_args: Sequence[str] = (),
    label: str = "",
) -> dict[str, Any]:
    """Freshness of one ``weir run``; ``extra_args``: more of its flags (``--master …``),
    ``label``: names its state directory apart from other runs at this buffer timeout."""
    job_file = write_job(workdir, rate)
    key = probe_key(parallelism)
    with (
        serving(
            job_file,
            workdir / f"state-fresh-{buffer_timeout_ms}{label}",
            "--parallelism",
            str(parallelism),
            "--buffer-timeout-ms",
            str(buffer_timeout_ms),
            *extra_args,
            start_timeout_s=FIRST_ANSWER_S,
        ) as url,
        httpx.Client(base_url=url, timeout=5) as client,
    ):
        ages = probe(client, key, warmup_s=warmup_s, seconds=seconds)
    return {
        "rate": rate,
        "parallelism": parallelism,
        "buffer_timeout_ms": buffer_timeout_ms,
        **summary(ages),
    }


def write_job(workdir: Path, rate: int) -> Path:
    job_file = workdir / "fresh_job.py"
    job_file.write_text(JOB.format(rate=rate))
    return job_file
