"""weir without its Spark extra, as ``pip install weir-stream`` leaves it: a ``sitecustomize`` on
PYTHONPATH makes pyspark, and the py4j, Arrow, pandas and NumPy that only the extra brings,
unimportable in every weir process (workers are spawned, so they load it too). ``weir run``,
``weir api``, ``weir demo`` and ``weir produce`` work; ``weir backfill`` says in one line which
extra to install."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support import (
    WEIR,
    WeirResult,
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.reference import Spec, group_emissions, simulate
from tests.support.servers import SERVING

NOT_INSTALLED = ("pyspark", "py4j", "pandas")  # numpy and pyarrow are core (kernels, exchange)
SITECUSTOMIZE = f"""
import sys
from importlib.abc import MetaPathFinder


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {NOT_INSTALLED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""
SPEC = Spec(bound=200, size=1_000, lateness=0)


@pytest.fixture
def no_spark(tmp_path: Path) -> dict[str, str]:
    """The environment of a weir process without the Spark extra's packages."""
    site = tmp_path / "no-spark"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_the_packages_are_gone_and_weir_imports_without_them(no_spark: dict[str, str]) -> None:
    for name in NOT_INSTALLED:
        r = _python(f"import {name}", no_spark)
        assert r.returncode == 1 and f"No module named '{name}'" in r.stderr, r.stderr
    modules = "weir, weir.api, weir.app.cli, weir.app.supervise, weir.app.api_process"
    r = _python(f"import {modules}, weir.app.produce; print(weir.__version__)", no_spark)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() and r.stdout.strip() != "0+unknown"


def test_run_and_api_without_the_spark_extra(
    tmp_path: Path,
    no_spark: dict[str, str],
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    lines = event_lines(make_events(2_000, seed=3))
    ref = simulate(lines, SPEC)
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    result = run_weir(
        "run", str(job), "--exit-at-end", "--sink", f"file://{out}", "--state-dir", str(state),
        "--parallelism", "2", "--api-port", "0", env=no_spark,
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert group_emissions(read_jsonl(out)) == ref.emissions

    api = weir_server(job, command="api", state_dir=state, env=no_spark)
    body = api.client().get("/t1/imps/state/ad-0", params={"limit": 10_000}).json()
    assert body["windows"] == ref.state_by_key()["ad-0"]


def test_demo_without_the_spark_extra(tmp_path: Path, no_spark: dict[str, str]) -> None:
    stderr = tmp_path / "demo.stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [*WEIR, "demo", "--api-port", "0", "--state-dir", str(tmp_path / "state")],
            cwd=tmp_path, env={**os.environ, **no_spark}, stdout=subprocess.DEVNULL,
            stderr=err, start_new_session=True,
        )  # fmt: skip
    try:

        def serving() -> re.Match[str] | None:
            assert proc.poll() is None, stderr.read_text()
            return SERVING.search(stderr.read_text())

        base = wait_until(serving, 30.0, what="weir demo to serve").group(2)
        with httpx.Client(base_url=base, timeout=10, trust_env=False) as client:
            keys = wait_until(
                lambda: client.get("/ad-stats/impressions/state").json().get("keys"),
                30.0,
                what="the demo's first keys",
            )
        assert keys
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_produce_works_and_backfill_names_the_extra(
    tmp_path: Path,
    no_spark: dict[str, str],
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
) -> None:
    history = tmp_path / "history.jsonl"
    made = run_weir("produce", "--file", str(history), "--count", "5000", env=no_spark)
    assert made.rc == 0, made.stderr
    assert len(history.read_text().splitlines()) == 5_000

    job = write_job(history, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness)
    r = run_weir(
        "backfill", str(job), "--input", str(history), "--into-savepoint",
        str(tmp_path / "savepoints"), env=no_spark,
    )  # fmt: skip
    assert r.rc == 2
    assert r.error_lines() == [
        "weir: error: weir backfill (it runs on Spark) needs weir's spark extra, and pyspark is "
        "not installed: pip install 'weir-stream[spark]'"
    ]
    assert r.stdout == ""
    assert not (tmp_path / "savepoints").exists()
