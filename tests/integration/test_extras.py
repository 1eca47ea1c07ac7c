"""weir's optional parts as extras of ``weir-stream`` (issue 39 item 15): with an extra's modules
made unimportable in every weir process (a meta-path blocker in a ``sitecustomize`` on
PYTHONPATH, as ``test_without_spark`` does for Spark), the part that needs them is refused in
one line naming the extra, before anything starts; with every extra gone, the core still runs
a job over a file and serves it. ``dir(weir)`` shows the public API only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WeirResult, job_text

Run = Callable[..., WeirResult]
EXTRAS = {
    "kafka": ("confluent_kafka", "kafka", "crc32c"),
    "s3": ("obstore",),
    "sql": ("sqlglot",),
    "spark": ("pyspark", "py4j", "pandas"),  # numpy and pyarrow are core (kernels, exchange)
}
BLOCKER = """
import sys
from importlib.abc import MetaPathFinder


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {gone!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def _without(tmp_path: Path, *extras: str) -> dict[str, str]:
    """The environment of a weir process where ``extras`` were never installed."""
    gone = sorted({m for extra in extras for m in EXTRAS[extra]})
    site = tmp_path / f"without-{'-'.join(extras)}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(gone=gone))
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path}


def _one_line(r: WeirResult, line: str) -> None:
    assert r.rc == 2, r.stderr
    assert r.error_lines() == [f"weir: error: {line}"], r.stderr
    assert r.stdout == ""


def test_a_kafka_source_sink_or_topic_names_the_kafka_extra(
    run_weir: Run, job_file: Path, tmp_path: Path
) -> None:
    env = _without(tmp_path, "kafka")
    needs = "needs weir's kafka extra, and confluent_kafka is not installed: " + (
        "pip install 'weir-stream[kafka]'"
    )
    r = run_weir("run", str(job_file), "--source", "kafka://127.0.0.1:9/ads", env=env)
    _one_line(r, f"--source: Kafka source kafka://127.0.0.1:9/ads {needs}; see 'weir run --help'")
    r = run_weir("run", str(job_file), "--sink", "kafka://127.0.0.1:9/out", env=env)
    _one_line(r, f"--sink: Kafka sink kafka://127.0.0.1:9/out {needs}; see 'weir run --help'")
    r = run_weir("produce", "--bootstrap", "127.0.0.1:9", "--count", "5", env=env)
    _one_line(r, f"weir produce into a Kafka topic (without --file) {needs}")
    made = run_weir("produce", "--file", "h.jsonl", "--count", "5", env=env)
    assert made.rc == 0 and len((tmp_path / "h.jsonl").read_text().splitlines()) == 5


def test_s3_storage_names_the_s3_extra(run_weir: Run, job_file: Path, tmp_path: Path) -> None:
    r = run_weir(
        "run", str(job_file), "--checkpoint-dir", "s3://bucket/prefix",
        env=_without(tmp_path, "s3"),
    )  # fmt: skip
    _one_line(
        r,
        "storage on S3 (s3://bucket/prefix) needs weir's s3 extra, and obstore is not "
        "installed: pip install 'weir-stream[s3]'",
    )


def test_a_sql_job_names_the_sql_extra(run_weir: Run, tmp_path: Path) -> None:
    job = tmp_path / "ads.sql"
    job.write_text(
        "CREATE TABLE events (id STRING, ts BIGINT, WATERMARK FOR ts AS ts) "
        "WITH ('url' = 'file:///tmp/events.jsonl');\n"
        "CREATE VIEW v AS SELECT id, window_start, window_end, COUNT(*) AS n FROM "
        "TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
        "GROUP BY id, window_start, window_end;\n"
    )
    r = run_weir("explain", str(job), env=_without(tmp_path, "sql"))
    _one_line(
        r,
        "SQL (a .sql job file, job.sql) needs weir's sql extra, and sqlglot is not installed: "
        "pip install 'weir-stream[sql]'",
    )


def test_the_core_runs_a_job_over_a_file_without_any_extra(run_weir: Run, tmp_path: Path) -> None:
    env = _without(tmp_path, *EXTRAS)
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0))
    r = run_weir(
        "run", str(job), "--sink", "out.jsonl", "--exit-at-end", "--api-port", "0",
        "--parallelism", "1", "--state-dir", "st", env=env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["key"] == "a"
    code = "import weir, weir.client; from weir import Job; print(weir.__version__)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() not in ("", "0+unknown"), done.stderr


@pytest.mark.parametrize("module", ["weir", "weir.client"])
def test_dir_shows_the_public_api_only(module: str) -> None:
    code = f"import {module} as m; print(' '.join(dir(m)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    names = done.stdout.split()
    assert names and "annotations" not in names and "importlib" not in names, done.stderr
    public = __import__(module, fromlist=["__all__"]).__all__
    assert set(names) == set(public)
