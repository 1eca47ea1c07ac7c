"""``GET /health`` of a job whose worker fails for good (its input is missing and checkpoints
are off, so there is no restart): 503 ``failed`` naming the job and why, from the API inside
the job manager's process and from ``weir api`` beside a ``weir run --no-api``; 200
``degraded`` while ``weir api`` has no status from a job manager."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from tests.support import WeirResult, WeirServer, wait_until
from weir.api import Registry, create_app, handle_for
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import load_configured_job


@contextmanager
def serving(registry: Registry) -> Iterator[httpx.Client]:
    """The app on a real uvicorn server (loopback, a free port) in a thread of this process."""
    server = uvicorn.Server(
        uvicorn.Config(create_app(registry), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 15.0, what="uvicorn to start")
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False) as c:
            yield c
    finally:
        server.should_exit = True
        thread.join(10.0)


def failed_health(client: httpx.Client) -> dict[str, Any] | None:
    r = client.get("/health")
    body: dict[str, Any] = r.json()
    if body["status"] != "failed":
        assert r.status_code == 200, r.text
        return None
    assert r.status_code == 503, r.text
    return body


def job_state(client: httpx.Client, state: str) -> float:
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    return next(s.value for s in families["weir_job_state"].samples if s.labels["state"] == state)


def test_the_api_in_the_job_managers_process_answers_503_once_the_job_failed(
    tmp_path: Path, write_job: Callable[..., Path]
) -> None:
    missing = tmp_path / "missing.jsonl"
    cfg = RunConfig(job_file=write_job(missing, bound=0, size=10, lateness=0),
                    state_dir=tmp_path / "state")  # fmt: skip
    job = load_configured_job(cfg)
    manager = JobManager(cfg, job)
    registry = Registry()
    registry.add(handle_for(job, manager, cfg))
    manager.start()
    try:
        with serving(registry) as client:
            body = wait_until(lambda: failed_health(client), 30.0, what="/health to say failed")
            assert body["jobs"] == {"t1": "failed"}
            assert body["problems"]["t1"].startswith("worker 0 failed:")
            assert str(missing) in body["problems"]["t1"]
            assert client.get("/jobs/t1").json()["state"] == "failed"
            assert job_state(client, "failed") == 1 and job_state(client, "running") == 0
    finally:
        manager.stop()


def test_weir_api_answers_503_for_a_job_that_failed_and_keeps_saying_so(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    missing = tmp_path / "missing.jsonl"
    job = write_job(missing, bound=0, size=10, lateness=0)
    state = tmp_path / "state"
    api = weir_server(job, command="api", state_dir=state)
    client = api.client()
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "degraded", r.text
    assert "jobmanager.json is missing" in r.json()["problems"]["t1"]

    # a broker nobody listens on: the input check passes, the workers fail once they start
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run_weir(
        "run", str(job), "--no-api", "--state-dir", str(state),
        "--source", f"kafka://127.0.0.1:{port}/events",
        env={"WEIR_KAFKA_CONNECT_TIMEOUT_S": "2"}, timeout=30.0,
    )  # fmt: skip
    assert result.rc == 1, result.stderr
    body = wait_until(lambda: failed_health(client), 10.0, what="/health to say failed")
    assert body["jobs"] == {"t1": "failed"}
    assert re.match(r"worker [01] failed: ", body["problems"]["t1"]), body  # the first to fail
    assert f"cannot reach the Kafka broker at 127.0.0.1:{port}" in body["problems"]["t1"]

    # the job manager is gone and its last status ages past staleness: the job stays failed
    written = orjson.loads((state / "t1" / "jobmanager.json").read_bytes())["written_at"]
    wait_until(lambda: time.time() * 1000 - written > 4_000, 10.0, interval=0.2,
               what="the status to be older than weir api's staleness limit")  # fmt: skip
    assert failed_health(client) == body
    assert job_state(client, "failed") == 1 and job_state(client, "unknown") == 0
