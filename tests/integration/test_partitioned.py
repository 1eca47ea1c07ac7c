"""The partitioned engine under stress: a worker killed mid-run, and a slow operator that must
slow the sources down (backpressure) instead of growing memory."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.support import WeirServer, alive, rss_bytes, wait_until, worker_pids

SLOW_JOB = """
import time
from weir import Job, WatermarkStrategy, agg, sources, windows

class SlowForAd0:
    '''Counts, but takes ~0.3 ms per record of ad-0: the worker owning ad-0 falls behind.'''
    def create(self):
        return 0
    def add(self, acc, record):
        if record["id"] == "ad-0":
            time.sleep(0.0003)
        return acc + 1
    def merge(self, a, b):
        return a + b
    def result(self, acc):
        return acc

job = Job("bp")
(
    job.source(sources.generator("ads", rate=0, ids=50, skew=1.0), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("slow", n=agg.custom(SlowForAd0()))
)
"""

LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=2000, ids=100), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=500))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def test_a_killed_worker_stops_the_job_with_a_message_naming_it(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    server = weir_server(job, "--parallelism", "2")
    client = server.client()
    wait_until(lambda: client.get("/jobs/live").json()["state"] == "running", 20.0)
    workers = sorted(wait_until(lambda: worker_pids(server.proc.pid), 10.0, what="workers"))
    victim = workers[-1]
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    rc = server.proc.wait(15)
    noticed_in = time.monotonic() - killed_at
    stderr = server.stderr()
    assert rc == 1, stderr
    assert noticed_in < 10, f"the job took {noticed_in:.1f}s to stop"
    assert "failed: worker" in stderr and "exited with code -9" in stderr, stderr
    wait_until(lambda: not any(alive(w) for w in workers), 10.0, what="the other worker to exit")


def test_a_slow_operator_slows_the_sources_and_memory_stays_flat(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "bp.py"
    job.write_text(SLOW_JOB)
    server = weir_server(job, "--parallelism", "2")
    client = server.client()
    wait_until(lambda: client.get("/jobs/bp").json()["state"] == "running", 20.0)
    workers = sorted(wait_until(lambda: worker_pids(server.proc.pid), 10.0, what="workers"))

    def pressured() -> list[dict[str, float]] | None:
        ws = client.get("/jobs/bp").json()["workers"]
        return ws if max(w["backpressure"] for w in ws) > 0.2 else None

    wait_until(pressured, 20.0, what="a worker to report backpressure")
    time.sleep(1.0)  # warm-up: RocksDB buffers and Python's allocator settle
    before = {w: rss_bytes(w) for w in workers}
    deadline = time.monotonic() + 8.0
    peak_pending = 0
    while time.monotonic() < deadline:
        ws = client.get("/jobs/bp").json()["workers"]
        peak_pending = max(peak_pending, *(w["pending_bytes"] for w in ws))
        time.sleep(0.25)
    after = {w: rss_bytes(w) for w in workers}
    for w in workers:
        grown = after[w] - before[w]
        assert grown < 24 * 1024 * 1024, f"worker {w} grew {grown / 2**20:.1f} MiB in 8 s"
    # outputs stay bounded: the 16 MiB pause threshold plus at most one batch in flight
    assert peak_pending < 40 * 1024 * 1024, peak_pending
    body = client.get("/jobs/bp").json()
    assert body["state"] == "running"
    assert body["records_in"] > 0
