"""Fixtures shared by every test package. Fixtures are factories; processes are always reaped.

def test_x(write_events, write_job, weir_server):
    src = write_events("in.jsonl", events)
    server = weir_server(write_job(src, bound=200, size=1_000, lateness=0))
    server.client().get("/jobs/t1")
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import support
from tests.support import WeirResult, WeirServer, job_text
from tests.support import write_events as _write_events
from tests.support.jvm import JAVA_OPTIONS, quick_jvm_env
from tests.support.s3_server import S3Server
from tests.support.servers import Env, S3Place, Servers, run_weir_in, unique_prefix
from tests.support.servers import weir_env as servers_weir_env
from tests.support.spark_cluster import SparkCluster
from tests.support.sparksession import SharedSpark
from tests.support.tiers import (
    folder_of,
    forbid_processes,
    mark_groups,
    misplaced,
    selects_none_of,
    tier_of,
    worker_groups,
)

# No example database: the suite writes nothing outside tmp dirs; examples are bounded per test.
settings.register_profile(
    "weir",
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("weir")

TESTS_ROOT = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    """Every Spark JVM the suite starts, in this process or a child, runs with the quick-start
    settings of ``tests.support.jvm`` (unless the environment already names its own)."""
    conf_dir = Path(tempfile.mkdtemp(prefix="weir-test-spark-conf-"))
    config.add_cleanup(lambda: shutil.rmtree(conf_dir, ignore_errors=True))
    for name, value in quick_jvm_env(conf_dir).items():
        os.environ.setdefault(name, value)


_CPU_S: dict[str, float] = {}  # each test's CPU (``pytest_runtest_protocol``)


def _cpu_s() -> float:
    own, reaped = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's CPU-seconds, its setup and teardown included, with those of the processes
    it started and reaped (a shared fixture's count where it is torn down): on a 2-core host
    the suite's time is its CPU, which durations shared between workers hide."""
    before = _cpu_s()
    yield
    _CPU_S[item.nodeid] = round(_cpu_s() - before, 2)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Where ``WEIR_TEST_CPU`` names a folder (``make test`` with ``JUNIT_DIR``: one per
    tier), each process's tests' CPU-seconds go to ``cpu-<worker>.json`` there, most first."""
    where = os.environ.get("WEIR_TEST_CPU")
    if where and _CPU_S:
        folder = Path(where)
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        ranked = dict(sorted(_CPU_S.items(), key=lambda kv: -kv[1]))
        (folder / f"cpu-{worker}.json").write_text(json.dumps(ranked, indent=1))


__all__ = ["S3Place", "WeirResult", "WeirServer"]
# --kernels and the ``kernels`` fixture (each kernel test runs on both implementations)
pytest_plugins = ["tests.support.kernel_impls"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A tier's run (``-m fast``, ``-m integration``, ...) does not import the folders under
    ``tests/`` that hold none of its tests (``tiers.selects_none_of``); None: pytest decides."""
    if collection_path.parent != TESTS_ROOT or not collection_path.is_dir():
        return None
    return True if selects_none_of(config.option.markexpr or "", collection_path.name) else None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier and its xdist group (``tests/support/tiers.py``); a
    fast-folder test that uses a fixture which starts processes stops the run, naming where it
    belongs."""
    wrong = []
    mark_groups(config, items, worker_groups(items))
    for item in items:
        folder = folder_of(item, TESTS_ROOT)
        item.add_marker(tier_of(folder, getattr(item, "fixturenames", ())))
        reason = misplaced(item, folder)
        if reason:
            wrong.append(reason)
    if wrong:
        raise pytest.UsageError("tests in the wrong tier:\n" + "\n".join(wrong))


@pytest.fixture(autouse=True)
def _tier_rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast test starts no process (``tests.support.tiers.forbid_processes``)."""
    if request.node.get_closest_marker("fast") is not None:
        forbid_processes(monkeypatch, request.node.nodeid)


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


@pytest.fixture
def run_weir(tmp_path: Path) -> Callable[..., WeirResult]:
    """``run_weir(*args, timeout=60, env=None)``: run ``weir`` to completion in ``tmp_path``."""

    def run(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> WeirResult:
        return run_weir_in(tmp_path, *args, timeout=timeout, env=env)

    return run


@pytest.fixture(scope="session")
def weir_env() -> Env:
    """``weir_env(extra)``: the environment of a ``weir`` process a test starts itself (this one's
    without any ``WEIR_*`` variable, plus ``extra``). A test that asks for it starts processes, so
    it is in the integration tier (``tests/support/tiers.py``)."""
    return servers_weir_env


@pytest.fixture
def docker_compose() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``docker_compose(*args, env=None)``: Debian's ``docker-compose -f docker-compose.yml``
    (no Docker engine: ``config`` judges the file), to completion within 60 s."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker-compose", "-f", str(TESTS_ROOT.parent / "docker-compose.yml"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    return run


@pytest.fixture
def weir_server(tmp_path: Path) -> Iterator[Callable[..., WeirServer]]:
    """``weir_server(job_file, *flags, state_dir=None)`` starts ``weir run`` on a free loopback
    port, waits for its ``serving on`` line and stops it (SIGTERM, then kill) in teardown."""
    servers = Servers(tmp_path)
    yield servers.start
    servers.stop_all()


@pytest.fixture(scope="module")
def module_weir_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., WeirServer]]:
    """Like ``weir_server``, for a server that a whole test module queries."""
    servers = Servers(tmp_path_factory.mktemp("servers"))
    yield servers.start
    servers.stop_all()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker (Kafka protocol) on a free loopback port for the whole session."""
    from tests.support.kafka_broker import tansu

    with tansu(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def kafka_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Tansu broker behind a TLS proxy that requires a client certificate, with the test
    CA and certificates (``tests.support.kafka_tls.TlsBroker``)."""
    from tests.support.kafka_tls import tansu_tls

    with tansu_tls(tmp_path_factory.mktemp("kafka-tls")) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker that requires SASL SCRAM authentication (and knows no user)."""
    from tests.support.kafka_tls import tansu_sasl

    with tansu_sasl(tmp_path_factory.mktemp("kafka-sasl")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def _shared_spark() -> Iterator[SharedSpark]:
    shared = SharedSpark("local[2]")
    yield shared
    shared.stop()


@pytest.fixture
def spark(_shared_spark: SharedSpark) -> Any:
    """The test process's one real local SparkSession (``local[2]``, one JVM,
    ``tests.support.sparksession``), started again if an earlier test left it broken. A test
    runs the backfill on it in-process (``run_backfill(..., session=spark)`` or
    ``tests.support.backfill``) and never stops it."""
    return _shared_spark.get()


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
    workers (``tests.support.spark_cluster``), started by the first test that asks (~10 s). Without
    Java or pyspark's spark-class the test fails, naming what to install. It authenticates
    every client: Spark sessions of this process and the ``weir`` runs it starts have its
    ``SPARK_CONF_DIR`` in their environment until the session ends."""
    with SparkCluster(
        tmp_path_factory.mktemp("spark-cluster"), workers=2, executor_java_options=JAVA_OPTIONS
    ) as cluster:
        with cluster.clients_here():
            yield cluster


@pytest.fixture
def s3(s3_server: S3Server, request: pytest.FixtureRequest) -> S3Place:
    """A unique prefix in the session's S3 bucket (no two tests share objects)."""
    return S3Place(s3_server, unique_prefix(request.node.name))


@pytest.fixture(scope="module")
def module_s3(s3_server: S3Server, request: pytest.FixtureRequest) -> S3Place:
    """Like ``s3``, shared by a test module's tests."""
    return S3Place(s3_server, unique_prefix(request.module.__name__.rpartition(".")[2]))
