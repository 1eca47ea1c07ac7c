"""Faults while a job runs: checkpoint storage that cannot be written (the checkpoint fails,
processing goes on, ``/health`` says degraded, the next checkpoint succeeds once storage is
back), and a Kafka broker that stops answering for 30 s (the job waits, then resumes with
nothing lost)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import WeirServer, job_text, make_events, wait_until
from tests.support.kafka_broker import create_topic, send

LIVE = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("faults")
(
    job.source(sources.generator("ads", rate=2000, ids=100), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def test_unwritable_checkpoint_storage_degrades_health_and_processing_goes_on(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "faults.py"
    job.write_text(LIVE)
    storage = tmp_path / "chk"
    server = weir_server(job, "--parallelism", "2", "--checkpoint-dir", str(storage),
                         "--checkpoint-interval-ms", "200")  # fmt: skip
    client = server.client()
    wait_until(lambda: (client.get("/jobs/faults").json().get("last_checkpoint") or 0) >= 1, 30.0)
    # storage breaks: its shared directory becomes a file (root ignores permissions)
    shared = storage / "faults" / "shared"
    gone = shared.with_name("gone")
    shared.rename(gone)  # at once: a checkpoint being written meanwhile goes on in ``gone``
    shared.write_text("not a directory")
    shutil.rmtree(gone, ignore_errors=True)

    def degraded() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get("/health").json()
        return body if body["status"] == "degraded" else None

    health = wait_until(degraded, 30.0, what="/health to say degraded")
    assert "checkpoint" in health["problems"]["faults"] and "failed" in health["problems"]["faults"]
    before = client.get("/jobs/faults").json()
    wait_until(
        lambda: client.get("/jobs/faults").json()["records_in"] > before["records_in"] + 1000,
        30.0,
        what="processing to go on",
    )
    assert client.get("/jobs/faults").json()["state"] == "running"
    # storage comes back: the next checkpoint succeeds and health recovers
    shared.unlink()
    shared.mkdir()
    last = before["last_checkpoint"]
    wait_until(
        lambda: (client.get("/jobs/faults").json().get("last_checkpoint") or 0) > last,
        30.0,
        what="a checkpoint after storage returned",
    )
    wait_until(lambda: client.get("/health").json()["status"] == "ok", 10.0)


def _tansu_pid(bootstrap: str) -> int:
    port = bootstrap.rsplit(":", 1)[1]
    out = subprocess.run(["pgrep", "-f", f"tansu.*127.0.0.1:{port}"], capture_output=True,
                         text=True).stdout.split()  # fmt: skip
    assert out, "the test broker's process"
    return int(out[0])


def test_a_broker_unavailable_for_30_s_then_back_loses_nothing(
    tmp_path: Path, weir_server: Callable[..., WeirServer], kafka_broker: str
) -> None:
    topic = f"pause-{os.getpid()}"
    create_topic(kafka_broker, topic, 2)
    first = make_events(1_000, seed=90, jitter=50, far_fraction=0.0)
    send(kafka_broker, topic, [(i % 2, e) for i, e in enumerate(first)])
    job = tmp_path / "job.py"
    job.write_text(job_text(Path("unused.jsonl"), bound=100, size=1_000, lateness=0))
    server = weir_server(job, "--source", f"kafka://{kafka_broker}/{topic}", "--parallelism", "2",
                         "--idle-timeout-ms", "500")  # fmt: skip
    client = server.client()
    wait_until(lambda: client.get("/jobs/t1").json()["records_in"] == 1_000, 30.0)
    tansu = _tansu_pid(kafka_broker)
    os.kill(tansu, signal.SIGSTOP)  # the broker stops answering (its storage is memory only)
    try:
        time.sleep(30)  # the outage itself: nothing to wait for but time
        body = client.get("/jobs/t1").json()
        assert body["state"] == "running", server.stderr()[-2000:]
    finally:
        os.kill(tansu, signal.SIGCONT)
    second = make_events(1_000, seed=91, start=first[-1]["ts"] + 2_000, jitter=50,
                         far_fraction=0.0)  # fmt: skip
    send(kafka_broker, topic, [(i % 2, e) for i, e in enumerate(second)])
    wait_until(lambda: client.get("/jobs/t1").json()["records_in"] == 2_000, 60.0,
               what="the records produced after the broker came back")  # fmt: skip
    assert server.proc.poll() is None
