"""Fixtures shared by every test package. Fixtures are factories; processes are always reaped.

def test_x(write_events, write_job, weir_server):
    src = write_events("in.jsonl", events)
    server = weir_server(write_job(src, bound=200, size=1_000, lateness=0))
    server.client().get("/jobs/t1")
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from loadtest.s3_server import S3Server
from loadtest.spark_cluster import SparkCluster
from tests import support
from tests.support import WEIR, WeirResult, WeirServer, job_text
from tests.support import write_events as _write_events

# No example database: the suite writes nothing outside tmp dirs; examples are bounded per test.
settings.register_profile(
    "weir",
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("weir")

SERVING = re.compile(r"weir: job (\S+) serving on (http://[\d.]+:(\d+))")
# `weir run --no-api` says this instead
HEADLESS = re.compile(r"weir: job (\S+) running without an API")
RUN_TIMEOUT_S = 60.0

__all__ = ["S3Place", "WeirResult", "WeirServer"]
# --kernels and the ``kernels`` fixture (each kernel test runs on both implementations)
pytest_plugins = ["tests.kernel_impls"]


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(fn, timeout=15.0)``: poll every 50 ms until ``fn()`` is truthy."""
    return support.wait_until


@pytest.fixture
def write_events(tmp_path: Path) -> Callable[[str, Sequence[dict[str, Any]]], Path]:
    """``write_events(name, events)`` writes ``tmp_path/name`` as JSONL and returns its path."""

    def write(name: str, events: Sequence[dict[str, Any]]) -> Path:
        return _write_events(tmp_path / name, events)

    return write


@pytest.fixture
def write_job(tmp_path: Path) -> Callable[..., Path]:
    """``write_job(source_path, bound=, size=, lateness=, name="t1", op="imps", steps=...)``."""
    counter = iter(range(1_000_000))

    def write(source_path: Path, **spec: Any) -> Path:
        path = tmp_path / f"job_{next(counter)}.py"
        path.write_text(
            job_text(source_path, **spec),
            encoding="utf-8",
        )
        return path

    return write


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@pytest.fixture
def run_weir(tmp_path: Path) -> Callable[..., WeirResult]:
    """``run_weir(*args, timeout=60, env=None)``: run ``weir`` to completion in ``tmp_path``."""

    def run(*args: str, timeout: float = RUN_TIMEOUT_S, env: dict[str, str] | None = None):
        proc = subprocess.Popen(
            [*WEIR, *args],
            cwd=tmp_path,
            env=_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(
                f"weir {' '.join(args)} did not finish in {timeout}s; stderr:\n"
                + err.decode(errors="replace")
            ) from None
        return WeirResult(proc.returncode, out.decode(errors="replace"), err.decode())

    return run


class _Servers:
    """Starts ``weir run`` processes under ``root`` and stops every one of them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[WeirServer] = []

    def start(
        self,
        job_file: Path,
        *flags: str,
        state_dir: Path | None = None,
        timeout: float = 30.0,
        env: dict[str, str] | None = None,
        command: str = "run",
    ) -> WeirServer:
        """``command`` is ``run`` or ``api``; a ``run`` with ``--no-api`` has no base URL."""
        n = len(self.started)
        state = state_dir or self.root / f"state-{n}"
        stderr_path = self.root / f"server-{n}.stderr"
        ready = HEADLESS if "--no-api" in flags else SERVING
        argv = [*WEIR, command, str(job_file), "--api-port", "0", "--state-dir", str(state)]
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [*argv, *flags],
                cwd=self.root,
                env=_env(env),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        server = WeirServer(proc, "", "", state, stderr_path)
        self.started.append(server)

        def serving() -> re.Match[str] | None:
            text = server.stderr()
            assert proc.poll() is None, f"weir exited with {proc.returncode}:\n{text}"
            return ready.search(text)

        m = support.wait_until(serving, timeout, what=f"the {ready.pattern!r} line")
        server.job = m.group(1)
        server.base_url = m.group(2) if ready is SERVING else ""
        return server

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@pytest.fixture
def weir_server(tmp_path: Path) -> Iterator[Callable[..., WeirServer]]:
    """``weir_server(job_file, *flags, state_dir=None)`` starts ``weir run`` on a free loopback
    port, waits for its ``serving on`` line and stops it (SIGTERM, then kill) in teardown."""
    servers = _Servers(tmp_path)
    yield servers.start
    servers.stop_all()


@pytest.fixture(scope="module")
def module_weir_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., WeirServer]]:
    """Like ``weir_server``, for a server that a whole test module queries."""
    servers = _Servers(tmp_path_factory.mktemp("servers"))
    yield servers.start
    servers.stop_all()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker (Kafka protocol) on a free loopback port for the whole session."""
    from tests.kafka_broker import tansu

    with tansu(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def kafka_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Tansu broker behind a TLS proxy that requires a client certificate, with the test
    CA and certificates (``tests.kafka_tls.TlsBroker``)."""
    from tests.kafka_tls import tansu_tls

    with tansu_tls(tmp_path_factory.mktemp("kafka-tls")) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker that requires SASL SCRAM authentication (and knows no user)."""
    from tests.kafka_tls import tansu_sasl

    with tansu_sasl(tmp_path_factory.mktemp("kafka-sasl")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A real local SparkSession (``local[2]``) for a test module's backfills."""
    from weir.engine.spark.backfill import spark_session

    session = spark_session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    """A job file over one impression: for command-line tests that need a valid job."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    path = tmp_path / "job.py"
    path.write_text(job_text(src, bound=0, size=10, lateness=0))
    return path


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One SeaweedFS S3 server (``weed mini``, bucket ``weir``) on loopback for the session;
    a test that stops it must start it again (``S3Server.start`` keeps data and ports)."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone cluster on loopback for the session: a master and two one-core
    workers (``loadtest.spark_cluster``), started by the first test that asks (~10 s). Without
    Java or pyspark's spark-class the test fails, naming what to install. It authenticates
    every client: Spark sessions of this process and the ``weir`` runs it starts have its
    ``SPARK_CONF_DIR`` in their environment until the session ends."""
    with SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as cluster:
        with cluster.clients_here():
            yield cluster


@dataclass(frozen=True)
class S3Place:
    """A fresh prefix of the session's bucket: ``url`` is ``s3://weir/<unique>``, ``env`` the
    AWS_* settings a client (or a ``weir`` process) needs to reach it."""

    server: S3Server
    prefix: str

    @property
    def url(self) -> str:
        return self.server.url(self.prefix)

    @property
    def env(self) -> dict[str, str]:
        return self.server.env


@pytest.fixture
def s3(s3_server: S3Server, request: pytest.FixtureRequest) -> S3Place:
    """A unique prefix in the session's S3 bucket (no two tests share objects)."""
    return S3Place(s3_server, _unique_prefix(request.node.name))


@pytest.fixture(scope="module")
def module_s3(s3_server: S3Server, request: pytest.FixtureRequest) -> S3Place:
    """Like ``s3``, shared by a test module's tests."""
    return S3Place(s3_server, _unique_prefix(request.module.__name__.rpartition(".")[2]))


def _unique_prefix(name: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_-]+', '-', name)[:60]}-{uuid.uuid4().hex[:8]}"
