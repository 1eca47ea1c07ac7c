"""Point lookups request by request (decision 0027, "Later"): the query benchmark's job
(``benchmarks.query_bench``'s ``JOB``, ``--api-workers 1``) under ``--connections``
keep-alive connections of an asyncio client for ``--seconds``, each request's latency kept
with the time it ended, and the CPU of the API's process and of the worker read every
``SAMPLE_S``.

    python -m benchmarks.query_timeline [--seconds 30] [--connections 50] [--slow-ms 40]

``wrk`` gives a round's percentiles and no more; this shows *when* the slow requests came,
beside what each process did then: a stall at every window's fire (every 10 s), one while
the connections open, or spells that follow neither. Prints JSON: the rate, p50 and p99, the
status codes, and each ``SLICE_S`` slice that held a request slower than ``--slow-ms`` (its
requests, slowest, median, and the two processes' CPU seconds in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.query_bench import IDS, JOB, PATH, _wait_for, _wait_until_aged
from benchmarks.runs import serving
from tests.support.procs import cpu_seconds, weir_run_pid, worker_pids

SAMPLE_S = 0.1
SLICE_S = 0.25


async def _load(
    host: str, port: int, seconds: float, connections: int
) -> tuple[list[tuple[float, float]], dict[int, int]]:
    """(end, latency) of every request, and how many got each status."""
    done: list[tuple[float, float]] = []
    statuses: dict[int, int] = {}
    stop = time.perf_counter() + seconds

    async def connection(seed: int) -> None:
        pick = random.Random(seed)
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < stop:
                path = PATH % pick.randrange(IDS)
                t0 = time.perf_counter()
                writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                t1 = time.perf_counter()
                status = int(head[9:12])
                statuses[status] = statuses.get(status, 0) + 1
                done.append((t1, t1 - t0))
        finally:
            writer.close()

    await asyncio.gather(*(connection(i) for i in range(connections)))
    return done, statuses


def _sampled(
    pids: dict[str, list[int]], stop: threading.Event
) -> list[tuple[float, dict[str, float]]]:
    """Each process group's CPU seconds every ``SAMPLE_S`` until ``stop`` (filled by a thread)."""
    samples: list[tuple[float, dict[str, float]]] = []

    def run() -> None:
        while not stop.wait(SAMPLE_S):
            samples.append((time.perf_counter(), {k: cpu_seconds(v) for k, v in pids.items()}))

    threading.Thread(target=run, daemon=True, name="cpu-sampler").start()
    return samples


def timeline(workdir: Path, seconds: float, connections: int, slow_ms: float) -> dict[str, Any]:
    """Run the job, load it once it has aged as the query benchmark's does, and report."""
    job = workdir / "qbench_job.py"
    job.write_text(JOB)
    with serving(job, workdir / "state", "--parallelism", "1", "--api-workers", "1") as url:
        _wait_for(f"{url}/qbench/stats/state/ad-1", "weir")
        _wait_until_aged(url)
        api = weir_run_pid(job)
        pids = {"api": [api], "worker": worker_pids(api)}
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        stop = threading.Event()
        samples = _sampled(pids, stop)
        t0 = time.perf_counter()
        try:
            done, statuses = asyncio.run(_load(host, int(port), seconds, connections))
        finally:
            stop.set()
    return _report(t0, seconds, done, statuses, samples, slow_ms)


def _report(
    t0: float,
    seconds: float,
    done: list[tuple[float, float]],
    statuses: dict[int, int],
    samples: list[tuple[float, dict[str, float]]],
    slow_ms: float,
) -> dict[str, Any]:
    latencies = sorted(lat for _, lat in done)
    slices: dict[int, list[float]] = {}
    for end, lat in done:
        slices.setdefault(int((end - t0) / SLICE_S), []).append(lat)
    cpu: dict[int, dict[str, float]] = {}
    for (_, before), (t, after) in zip(samples, samples[1:], strict=False):
        into = cpu.setdefault(int((t - t0) / SLICE_S), {})
        for name, value in after.items():
            into[name] = into.get(name, 0.0) + value - before[name]
    slow = []
    for index in sorted(slices):
        lats = slices[index]
        if max(lats) * 1000 >= slow_ms:
            slow.append({
                "at_s": round(index * SLICE_S, 2),
                "requests": len(lats),
                "slowest_ms": round(max(lats) * 1000, 1),
                "median_ms": round(statistics.median(lats) * 1000, 1),
                "cpu_s": {k: round(v, 3) for k, v in cpu.get(index, {}).items()},
            })  # fmt: skip
    return {
        "requests": len(done),
        "requests_per_s": round(len(done) / seconds),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2) if latencies else None,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "slice_s": SLICE_S,
        "slow_slices": slow,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--slow-ms", type=float, default=40.0, help="report slices with one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="weir-qtimeline-") as workdir:
        out = timeline(Path(workdir), args.seconds, args.connections, args.slow_ms)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
