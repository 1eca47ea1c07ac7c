"""Does serving queries slow processing down? The same bounded job under ``weir run``, once with
no queries and once while clients query it as fast as they can (the API reads RocksDB secondary
instances, not the workers); the throughput ratio is the cost of serving."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.runs import serving


def _throughput(jobs: dict[str, Any]) -> float:
    workers = jobs["workers"]
    started = min(w["run_started_at"] for w in workers)
    finished = max(w["finished_at"] for w in workers)
    return float(jobs["records_in"]) / float(finished - started)


def run_once(
    job_file: Path,
    state_dir: Path,
    job: str,
    op: str,
    keys: int,
    parallelism: int,
    query_threads: int,
) -> dict[str, Any]:
    stop = threading.Event()
    answered = [0]
    failed = [0]

    def query(url: str, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=url, timeout=5) as client:
            while not stop.is_set():
                try:
                    r = client.get(
                        f"/{job}/{op}/state/ad-{rng.randrange(keys)}", params={"limit": 5}
                    )
                except httpx.HTTPError:
                    failed[0] += 1
                    continue
                if r.status_code in (200, 404):
                    answered[0] += 1
                else:
                    failed[0] += 1

    with serving(job_file, state_dir, "--parallelism", str(parallelism)) as url:
        threads = [
            threading.Thread(target=query, args=(url, i), daemon=True) for i in range(query_threads)
        ]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        with httpx.Client(base_url=url, timeout=5) as client:
            while True:
                body = client.get(f"/jobs/{job}").json()
                if body["state"] == "finished" and all(w["finished_at"] for w in body["workers"]):
                    break
                if body["state"] == "failed" or time.monotonic() - t0 > 300:
                    raise RuntimeError(f"job did not finish: {body['state']}")
                time.sleep(0.05)
        elapsed = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(10)
    return {
        "events_per_s": round(_throughput(body)),
        "queries": answered[0],
        "queries_per_s": round(answered[0] / elapsed),
    }


def measure(job_file: Path, workdir: Path, keys: int, parallelism: int = 2) -> dict[str, Any]:
    quiet = run_once(job_file, workdir / "state-quiet", "bench", "stats", keys, parallelism, 0)
    busy = run_once(job_file, workdir / "state-busy", "bench", "stats", keys, parallelism, 4)
    return {
        "no_queries": quiet,
        "with_queries": busy,
        "throughput_ratio": round(busy["events_per_s"] / quiet["events_per_s"], 2),
    }
