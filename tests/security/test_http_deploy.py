"""Deployment: the compose stack has no public default token, the image runs as an unprivileged
user, and a real ``weir run`` bound to every interface without a token serves only ``/health``
(with a log line saying why). No Docker engine runs here: Debian's ``docker-compose config``
judges the compose file, and the Dockerfile is read as text."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from tests.support import WeirServer, job_text

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def test_compose_refuses_to_start_without_a_token_or_the_object_store_key(
    docker_compose: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if k != "WEIR_API_TOKEN"}
        return docker_compose("config", env={**clean, **env})

    token, key = "s3cret-from-the-operator", "object-store-key-from-the-operator"
    for given, missing in (
        ({"WEIR_S3_SECRET": key}, "WEIR_API_TOKEN"),
        ({"WEIR_API_TOKEN": token}, "WEIR_S3_SECRET"),
    ):
        refused = _config(given)
        assert refused.returncode != 0
        assert f"set {missing}" in refused.stderr, refused.stderr
    accepted = _config({"WEIR_API_TOKEN": token, "WEIR_S3_SECRET": key})
    assert accepted.returncode == 0, accepted.stderr
    services = yaml.safe_load(accepted.stdout)["services"]
    for name in ("job", "backfill"):
        assert services[name]["environment"]["WEIR_API_TOKEN"] == token
    assert services["s3"]["environment"]["AWS_SECRET_ACCESS_KEY"] == key
    assert services["job"]["environment"]["AWS_SECRET_ACCESS_KEY"] == key
    assert ":-weir-demo" not in COMPOSE.read_text()  # the old public default


def test_the_image_runs_as_an_unprivileged_user_that_owns_its_volumes() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), users
    text = "\n".join(lines)
    assert re.search(rf"useradd\b.*\b{users[-1]}\b", text)
    volumes = {  # those of the services that run weir's image (the s3 service has its own)
        v.split(":")[1]
        for service in yaml.safe_load(COMPOSE.read_text())["services"].values()
        if service.get("build")
        for v in service.get("volumes", [])
    }
    assert volumes, "the stack mounts volumes"
    chown = re.search(r"chown \S+ ([^\n\\&]+)", text)
    assert chown and volumes <= set(chown.group(1).split()), (volumes, chown)
    last_user = max(i for i, line in enumerate(lines) if line.startswith("USER "))
    assert all(not line.startswith("RUN ") for line in lines[last_user:]), "RUN after USER"


def test_a_bind_to_every_interface_without_a_token_serves_only_health(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0))
    server = weir_server(job, "--api-host", "0.0.0.0")
    local = f"http://127.0.0.1:{urlsplit(server.base_url).port}"
    with httpx.Client(base_url=local, timeout=10.0, trust_env=False) as client:
        for method, path in [
            ("GET", "/jobs/t1"),
            ("GET", "/t1/imps/state/a"),
            ("GET", "/t1/imps/state"),
            ("POST", "/jobs/t1/savepoints"),
            ("GET", "/metrics"),
            ("GET", "/"),
        ]:
            r = client.request(method, path)
            assert r.status_code == 403, (path, r.text)
            error = r.json()["error"]
            assert error["code"] == "needs_token" and "WEIR_API_TOKEN" in error["message"]
        assert client.get("/health").status_code == 200
    logged = [line for line in server.stderr().splitlines() if "serves only /health" in line]
    assert len(logged) == 1 and "0.0.0.0" in logged[0], server.stderr()
