"""A running (unbounded) job: live queries while it runs, and a clean stop on SIGTERM."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import WeirServer, alive, descendants, job_text, wait_until

GENERATOR = "generator://ads?rate=3000&ids=5&seed=1&clock=synthetic&disorder=50"


def _job(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(job_text(tmp_path / "unused.jsonl", bound=100, size=500, lateness=0))
    return path


def test_live_queries_while_running(tmp_path: Path, weir_server: Callable[..., WeirServer]) -> None:
    server = weir_server(_job(tmp_path), "--source", GENERATOR)
    client = server.client()

    def running() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get("/jobs/t1").json()
        return body if body["state"] == "running" and body["records_in"] > 0 else None

    first = wait_until(running, 20.0, what="the job to run")
    assert first["source"].startswith("generator://ads")
    wait_until(
        lambda: client.get("/jobs/t1").json()["records_in"] > first["records_in"],
        10.0,
        what="records_in to grow",
    )
    assert client.get("/health").json() == {
        "status": "ok",
        "jobs": {"t1": "running"},
        "problems": {},
    }

    def open_and_fired() -> dict[str, Any] | None:
        r = client.get("/t1/imps/state/ad-0")
        if r.status_code != 200:
            return None
        body: dict[str, Any] = r.json()
        finals = {w["final"] for w in body["windows"]}
        return body if finals == {True, False} else None

    body = wait_until(open_and_fired, 20.0, what="ad-0 to have fired and open windows")
    wm = body["watermark"]
    for w in body["windows"]:
        assert w["final"] == (w["end"] - 1 <= wm)
        assert w["count"] >= 1 and w["lo"] <= w["avg"] <= w["hi"]
    ends = [w["end"] for w in body["windows"]]
    assert ends == sorted(ends)


def test_sigterm_stops_the_job_and_its_workers(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    server = weir_server(_job(tmp_path), "--source", GENERATOR, "--parallelism", "2")
    client = server.client()
    wait_until(lambda: client.get("/jobs/t1").json()["state"] == "running", 20.0)
    workers = wait_until(lambda: descendants(server.proc.pid), 10.0, what="worker processes")
    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: not any(alive(c) for c in workers), 20.0, what="workers to exit")
    # a graceful stop: supervise.run stops the job manager and returns 0
    assert server.proc.wait(20) == 0, server.stderr()


def test_bounded_job_keeps_serving_after_its_input(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Without --exit-at-end a bounded job keeps serving after its input is done."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    job = tmp_path / "bounded.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0))
    server = weir_server(job)
    assert server.base_url.startswith("http://127.0.0.1:")
    server.wait_finished()
    assert server.proc.poll() is None  # still serving
    assert server.client().get("/t1/imps/state/a").json()["windows"][0]["count"] == 1


BIG_SUM_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("big")
(
    job.source(sources.jsonl({src!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
    .key_by("id")
    .window(windows.tumbling(ms=1000))
    .aggregate("sums", total=agg.sum("v"), n=agg.count())
)
"""


def test_a_sum_past_64_bits_is_written_served_and_queried_exactly(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """A window's sum past 64 bits (the folds keep exact ints) crosses every process boundary:
    the worker's status to the job manager (it failed the job: msgpack's ints stop at 64
    bits), the status file, the state route, the listing and a pull query (orjson's do too),
    and the sink; the job never logs a traceback."""
    src, out = tmp_path / "big.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(f'{{"id": "a", "ts": {i * 100}, "v": {2**62}}}\n' for i in range(4)))
    job = tmp_path / "big.py"
    job.write_text(BIG_SUM_JOB.format(src=str(src)))
    server = weir_server(job, "--parallelism", "2", "--sink", f"file://{out}")
    server.wait_finished()
    client, total = server.client(), 2**64
    assert client.get("/big/sums/state/a").json()["windows"][0]["total"] == total
    assert client.get("/big/sums/state").json()["keys"] == ["a"]
    pulled = client.post("/big/sql", json={"query": "SELECT key, total FROM sums"}).json()
    assert pulled["rows"] == [{"key": "a", "total": total}]
    assert f'"total":{total},' in out.read_text()
    assert client.get("/jobs/big").json()["state"] == "finished"
    assert "Traceback" not in server.stderr(), server.stderr()


PROCESSING_TIME_JOB = """
from weir import Job, agg, sources, windows
job = Job("pt")
(
    job.source(sources.generator("ads", rate=1000, ids=5, skew=0), timestamp="ts")
    .key_by("id")
    .window(windows.tumbling(ms=200, time="processing"))
    .aggregate("counts", n=agg.count())
)
"""


def test_processing_time_windows_fire_on_the_clock(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """An unbounded source never ends, yet processing-time windows fire as the clock passes
    their end (on every worker, whether or not it has input at that moment)."""
    job = tmp_path / "pt.py"
    job.write_text(PROCESSING_TIME_JOB)
    started_ms = time.time() * 1000  # before the start: workers may fire before the API serves
    server = weir_server(job, "--parallelism", "2")
    client = server.client()

    def fired() -> list[dict[str, Any]] | None:
        r = client.get("/pt/counts/state/ad-1")
        if r.status_code != 200:
            return None
        done = [w for w in r.json()["windows"] if w["final"]]
        return done if len(done) >= 3 else None

    done = wait_until(fired, 20.0, what="three processing-time windows to fire")
    now_ms = time.time() * 1000
    for w in done:
        assert w["end"] - w["start"] == 200 and w["start"] % 200 == 0
        assert started_ms - 200 <= w["start"] and w["end"] <= now_ms
        assert w["n"] > 0
