"""Secrets weir is given are never shown back: not in any command's ``--help`` (which prints each
flag's environment default), not in a flag's error, not in ``/health`` (open to every client,
token or not) nor in the log, when a storage error quotes ``AWS_ENDPOINT_URL`` with a password
in its userinfo."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support import WEIR, WeirServer, job_text, wait_until
from tests.support.servers import Env, S3Place
from weir.app.parser import COMMANDS

API_TOKEN = "tok-6d1f0c2e9b8a4471"
SPARK_SECRET = "spark-secret-4be1a7d2"
S3_PASSWORD = "s3-userinfo-pw-93c1"


def _commands() -> list[str]:
    return sorted(command.name for command in COMMANDS)


@pytest.mark.parametrize("command", _commands())
def test_help_never_prints_a_secret_given_in_the_environment(command: str, weir_env: Env) -> None:
    env = weir_env(
        {
            "WEIR_API_TOKEN": API_TOKEN,
            "WEIR_SPARK_CONF": f"spark.authenticate.secret={SPARK_SECRET} spark.executor.cores=1",
            "WEIR_SOURCE": f"kafka://127.0.0.1:9/t?sasl_password={SPARK_SECRET}",
        }
    )
    done = subprocess.run(
        [*WEIR, command, "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert API_TOKEN not in shown
    assert SPARK_SECRET not in shown
    if "--api-token" in shown:  # the flag still says that a value is set, and where from
        assert "env WEIR_API_TOKEN, default (set)" in " ".join(shown.split())


def test_a_bad_secret_setting_is_named_without_its_value(weir_env: Env) -> None:
    env = weir_env({"WEIR_SPARK_CONF": f"spark.authenticate.secret={SPARK_SECRET} nonsense"})
    done = subprocess.run(
        [*WEIR, "run", "job.py", "--master", "spark://127.0.0.1:1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "WEIR_SPARK_CONF" in done.stderr and "'nonsense' is not a Spark setting" in done.stderr
    assert SPARK_SECRET not in done.stderr


def test_health_and_log_never_echo_the_s3_endpoints_password(
    tmp_path: Path, s3: S3Place, weir_server: Callable[..., WeirServer]
) -> None:
    """The store goes away under a running job: its checkpoint fails and /health says why,
    naming the endpoint, without the password of the endpoint's userinfo."""
    endpoint = s3.server.endpoint.replace("http://", f"http://weir:{S3_PASSWORD}@")
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=100, size=500, lateness=0))
    server = weir_server(
        job,
        "--source", "generator://ads?rate=500&ids=20&seed=1",
        "--checkpoint-dir", s3.url,
        "--checkpoint-interval-ms", "300",
        env={**s3.env, "AWS_ENDPOINT_URL": endpoint},
    )  # fmt: skip
    client = server.client()
    s3.server.stop()
    try:

        def degraded() -> httpx.Response | None:
            r = client.get("/health")
            return r if r.json()["status"] == "degraded" else None

        answer = wait_until(degraded, 60.0, what="/health to report the failed checkpoint")
        problem = answer.json()["problems"]["t1"]
        assert "127.0.0.1" in problem, problem  # the reason still names the server
        assert S3_PASSWORD not in answer.text
        wait_until(lambda: "127.0.0.1" in server.stderr(), 10.0, what="the logged failure")
        assert S3_PASSWORD not in server.stderr()
    finally:
        s3.server.start()
