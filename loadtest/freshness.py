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
from pathlib import Path
from typing import Any

import httpx

from loadtest.runs import serving
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


def measure(
    workdir: Path,
    *,
    rate: int,
    parallelism: int,
    buffer_timeout_ms: int,
    seconds: float = 4.0,
    warmup_s: float = 1.5,
) -> dict[str, Any]:
    job_file = workdir / "fresh_job.py"
    job_file.write_text(JOB.format(rate=rate))
    ages: list[float] = []
    key = probe_key(parallelism)
    with (
        serving(
            job_file,
            workdir / f"state-fresh-{buffer_timeout_ms}",
            "--parallelism",
            str(parallelism),
            "--buffer-timeout-ms",
            str(buffer_timeout_ms),
        ) as url,
        httpx.Client(base_url=url, timeout=5) as client,
    ):
        start = time.monotonic()
        while time.monotonic() - start < warmup_s + seconds:
            r = client.get(f"/fresh/seen/state/{key}", params={"limit": 1})
            now_ms = time.time() * 1000
            if r.status_code == 200 and time.monotonic() - start >= warmup_s:
                ages.append(now_ms - r.json()["windows"][-1]["newest"])
            time.sleep(0.01)
    if not ages:
        raise RuntimeError("no query answered with state; the job never became visible")
    return {
        "rate": rate,
        "parallelism": parallelism,
        "buffer_timeout_ms": buffer_timeout_ms,
        "samples": len(ages),
        "p50_ms": round(statistics.median(ages), 1),
        "p99_ms": round(percentile(ages, 0.99), 1),
    }
