"""The backfill tutorial (docs/tutorials/backfill.md), worked through as written: ``weir
backfill`` of the history into a savepoint, ``weir run`` restoring it, the page's query; then the
same history loaded into the running job with ``--live``. The backfill commands run in this
process on the session's SparkSession (``tests.support.backfill``: the command's own code
without a JVM of its own); the rest as the reader runs it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.support.backfill import backfill_in_process
from tests.support.tutorial import Reader

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = DOCS / "examples" / "backfill"
PAGE = DOCS / "tutorials" / "backfill.md"
PAGE_URL = "http://127.0.0.1:8000"


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    reader = Reader(tmp_path, FILES)
    try:
        yield reader
    finally:
        reader.stop_all()


def _backfill(spark: Any, reader: Reader, script: str, url: str = PAGE_URL) -> dict[str, Any]:
    """The page's ``weir backfill …`` line, run on the session's Spark; its summary."""
    argv = shlex.split((FILES / script).read_text().replace(PAGE_URL, url))
    assert argv[:2] == ["weir", "backfill"]
    result = backfill_in_process(spark, reader.root, *argv[2:])
    assert result.rc == 0, result.stderr[-3000:]
    summary: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return summary


def _query(reader: Reader, url: str) -> str:
    """``query.sh`` against ``url`` once the job has read all of today's events."""
    argv = (FILES / "query.sh").read_text().replace(PAGE_URL, url)

    def answer() -> str | None:
        out = reader.run("sh", "-c", argv)
        return out if '"watermark": 9223372036854775807' in out else None

    return wait_until(answer, 60, 0.5, what="the job to read today.jsonl")


def test_a_backfill_savepoint_restored_serves_history_and_today(reader: Reader, spark: Any) -> None:
    summary = _backfill(spark, reader, "backfill.sh")
    done = summary["backfill"]["per_minute"]  # by operator
    assert done["windows"] == 5 and done["late"] == 0
    assert summary["savepoint"] == str(reader.root / "savepoints" / "clicks" / "chk-1")

    run = reader.start("run.sh", "run.log")
    url = reader.serving(run, "run.log")
    assert _query(reader, url) == (FILES / "query.sh.out").read_text()
    assert "restored from" in (reader.root / "run.log").read_text()


def test_a_live_backfill_loads_history_into_the_running_job(reader: Reader, spark: Any) -> None:
    run = reader.start("run_fresh.sh", "run.log")
    url = reader.serving(run, "run.log")
    today_only = json.loads(_query(reader, url))
    assert [w["start"] for w in today_only["windows"]] == [120000, 180000]

    summary = _backfill(spark, reader, "live.sh", url)
    loaded, done = summary["live"]["per_minute"], summary["backfill"]["per_minute"]
    assert loaded["windows"] == done["windows"] == 5
    assert _query(reader, url) == (FILES / "query.sh.out").read_text()

    # the page's "what can go wrong": the same history again is refused, nothing doubled
    argv = shlex.split((FILES / "live.sh").read_text().replace(PAGE_URL, url))
    again = backfill_in_process(spark, reader.root, *argv[2:])
    assert again.rc == 2 and "backfill refused" in again.stderr
    assert "already has the window" in again.stderr
    assert _query(reader, url) == (FILES / "query.sh.out").read_text()


def test_the_page_includes_every_file() -> None:
    page = PAGE.read_text()
    for path in FILES.iterdir():
        assert f'--8<-- "examples/backfill/{path.name}"' in page, f"the page lacks {path.name}"
