"""The docker-compose stack without Docker (no engine runs here): the file is validated with
Debian's ``docker-compose config``, and every service's own command runs as a local process
with the service's environment, the test broker standing in for the ``kafka`` service, a
SeaweedFS server (the same ``weed mini``, with the service's credentials) for the ``s3`` one, and
temporary directories for the volumes. Host names and ports are the only substitutions."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import wait_until
from tests.support.broker import free_port
from tests.support.kafka_broker import read_topic
from tests.support.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


TOKEN = "compose-test-token"


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's ``environment``, with ``${VAR:-default}`` as docker-compose resolves it when
    ``VAR`` is unset and ``${VAR:?message}`` (a required variable) as it does when ``VAR`` is
    this test's ``TOKEN``."""

    def resolve(value: str) -> str:
        value = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
        return re.sub(r"\$\{\w+:\?[^}]*\}", TOKEN, value)

    return {name: resolve(str(value)) for name, value in (service.get("environment") or {}).items()}


def test_the_compose_file_is_valid() -> None:
    r = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, "WEIR_API_TOKEN": TOKEN, "WEIR_S3_SECRET": TOKEN},
    )
    assert r.returncode == 0, r.stderr
    services = _services()
    assert set(services) == {"kafka", "s3", "produce", "job", "backfill"}
    assert services["kafka"]["image"].startswith("apache/kafka")
    assert services["job"]["ports"] == ["127.0.0.1:8000:8000"]
    assert services["backfill"]["depends_on"]["job"]["condition"] == "service_healthy"
    assert services["job"]["depends_on"]["s3"]["condition"] == "service_healthy"
    assert "--checkpoint-dir s3://weir/" in services["job"]["command"]
    assert "--restore auto" in services["job"]["command"]  # a restarted container resumes
    assert "ports" not in services["s3"]  # the object store is reachable only inside the stack


@pytest.fixture
def local_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _localize(command: str, subs: dict[str, str]) -> str:
    for old, new in subs.items():
        command = command.replace(old, new)
    return command


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_every_service_command_runs_as_a_local_process(
    tmp_path: Path,
    kafka_broker: str,
    local_env: dict[str, str],
    processes: list[subprocess.Popen[bytes]],
) -> None:
    services = _services()
    port = free_port()
    s3_env = _environment(services["s3"])
    s3 = S3Server(tmp_path / "s3", s3_env["AWS_ACCESS_KEY_ID"], s3_env["AWS_SECRET_ACCESS_KEY"])
    s3.start()
    processes.append(s3.proc)  # type: ignore[arg-type]
    subs = {
        "http://s3:8333": s3.endpoint,
        "kafka:9092": kafka_broker,
        "http://job:8000": f"http://127.0.0.1:{port}",
        "--api-host 0.0.0.0": "--api-host 127.0.0.1",
        "--api-port 8000": f"--api-port {port}",
        "/state": str(tmp_path / "state"),
        "/backfill": str(tmp_path / "backfill"),
        "--count 200000": "--count 20000",  # a smaller history: the same command otherwise
    }
    (tmp_path / "backfill").mkdir()
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("produce", "job", "backfill")}  # noqa: SIM115

    def start(name: str, **more: str) -> subprocess.Popen[bytes]:
        command = _localize(services[name]["command"], {**subs, **more})
        argv = shlex.split(command)
        env = {
            **local_env,
            **{k: _localize(v, subs) for k, v in _environment(services[name]).items()},
        }
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=logs[name],
                                stderr=subprocess.STDOUT)  # fmt: skip
        processes.append(proc)
        return proc

    def log(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:]

    produce = start("produce")
    wait_until(
        lambda: produce.poll() is None and len(read_topic(kafka_broker, "ads", 2.0)) >= 2000,
        60.0,
        what=f"the produce service to write events; its log:\n{log('produce')}",
    )
    job = start("job")
    token = _environment(services["job"])["WEIR_API_TOKEN"]
    assert token and _environment(services["backfill"])["WEIR_API_TOKEN"] == token
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False,
                          headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    def serving() -> bool:
        assert job.poll() is None, log("job")
        try:
            return client.get("/ad-stats/impressions/state/ad-0").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(serving, 60.0, what="the job service to serve windows read from Kafka")
    assert httpx.get(f"http://127.0.0.1:{port}/jobs", trust_env=False).status_code == 401
    live = client.get("/ad-stats/impressions/state/ad-0", params={"limit": 10_000}).json()
    assert all(w["start"] > 1_750_000_000_000 for w in live["windows"])  # wall-clock windows

    def checkpointed() -> bool:
        answer = client.get("/jobs/ad-stats/checkpoints")
        assert answer.status_code == 200, answer.text
        return bool(answer.json()["checkpoints"])

    wait_until(checkpointed, 60.0, what="a checkpoint in the s3 service's bucket")
    # the container dies (kill -9) and a new one (an empty /state) runs the same command: it
    # resumes from the bucket's newest checkpoint (--restore auto), not from empty state
    job.kill()
    job.wait(10)
    job = start("job", **{"/state": str(tmp_path / "state-2")})
    wait_until(serving, 90.0, what="the restarted job service to serve again")
    resumed = client.get("/jobs/ad-stats/checkpoints").json()["restored_from"]
    assert resumed and resumed.startswith("s3://weir/checkpoints/ad-stats/chk-"), resumed
    assert "restored from" in (tmp_path / "job.log").read_text(errors="replace"), log("job")

    backfill = start("backfill")
    assert backfill.wait(300) == 0, log("backfill")
    after = client.get("/ad-stats/impressions/state/ad-0", params={"limit": 10_000}).json()
    history = [w for w in after["windows"] if w["start"] < 1_750_000_000_000]
    assert history, "the backfilled history is served beside the live windows"
    assert client.get("/jobs/ad-stats").json()["backfills"], "the job lists the backfill"
    assert job.poll() is None and produce.poll() is None

    checkpoints = client.get("/jobs/ad-stats/checkpoints").json()
    assert checkpoints["storage"] == "s3://weir/checkpoints/ad-stats"

    for f in logs.values():
        f.close()
