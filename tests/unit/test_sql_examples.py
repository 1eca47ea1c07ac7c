"""The SQL examples (app/examples/*.sql and the Python job with job.sql) run, each view giving
what the equivalent Python job gives on the same events; and every ```sql block of the docs is
one of those files (or included from docs/examples/), so the docs cannot drift from what is
tested."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support import make_events
from weir import Job, WatermarkStrategy, agg, sources, testing, windows
from weir.engine.runtime.loader import load_job
from weir.engine.sql import composite_key

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "app" / "examples"
SQL_FILES = sorted(EXAMPLES.glob("*.sql"))
EVENTS = make_events(3_000, seed=23, start=0, step=10, far_lag=(1_000, 9_000))


class Median:
    def create(self) -> list[float]:
        return []

    def add(self, acc: list[float], record: dict[str, Any]) -> list[float]:
        return [*acc, record["value"]]

    def merge(self, a: list[float], b: list[float]) -> list[float]:
        return a + b

    def result(self, acc: list[float]) -> float:
        return float(statistics.median(acc))


def _python_ad_stats() -> Job:
    """ad_stats.sql in the job API: SQL's watermark (``max(ts) - 2 s``), its declared ``id
    STRING`` and ``value DOUBLE`` (an int id becomes its text, a value a float), its
    NULL-skipping SUM and MAX, and SQL's AVG."""
    job = Job("ad-stats-sql")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.sql_delay(ms=2_000),
    ).map(lambda e: {**e, "id": str(e["id"]), "value": float(e["value"])})  # declared types
    (
        events.filter(lambda e: e["event"] == "impression")
        .key_by("id")
        .window(windows.tumbling(ms=10_000), allowed_lateness_ms=5_000)
        .aggregate(
            "impressions",
            impressions=agg.count(),
            total=agg.sum("value", nulls="skip"),
            max_value=agg.max("value", nulls="skip"),
        )
    )
    (
        events.key_by(lambda e: composite_key(e["id"], e["event"]))
        .window(windows.sliding(size_ms=10_000, slide_ms=5_000), allowed_lateness_ms=5_000)
        .aggregate(
            "by_event",
            n=agg.count(),
            mean_value=agg.avg("value"),
            median_value=agg.custom(Median()),
        )
    )
    return job


def test_ad_stats_sql_equals_the_python_job() -> None:
    sql = testing.run(load_job(EXAMPLES / "ad_stats.sql"), EVENTS)
    python = testing.run(_python_ad_stats(), EVENTS)
    assert sql.late and len(sql.by_operator["by_event"]) > 100
    assert sql.by_operator == python.by_operator
    assert sql.late == python.late
    assert any("|click" in r["key"] for r in sql.by_operator["by_event"])


def test_the_python_job_with_a_sql_query_equals_its_view_in_the_sql_file() -> None:
    from_py = testing.run(load_job(EXAMPLES / "ad_stats_sql.py"), EVENTS)
    from_sql = testing.run(load_job(EXAMPLES / "ad_stats.sql"), EVENTS)
    assert from_py.by_operator["impressions"] == [
        {k: v for k, v in r.items() if k != "max_value"}
        for r in from_sql.by_operator["impressions"]
    ]


def test_user_sessions_sql_equals_the_python_job() -> None:
    clicks = [
        {"user_id": f"u{e['id']}", "url": f"/p{e['value'] % 4}" + ("/health" * (e["value"] < -40)),
         "rowtime": e["ts"] * 1_000}
        for e in EVENTS
    ]  # fmt: skip
    job = Job("user-sessions")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="rowtime",
            watermarks=WatermarkStrategy.sql_delay(ms=10_000),
        )
        .filter(lambda c: not c["url"].endswith("/health"))
        .key_by("user_id")
        .window(windows.session(gap_ms=1_800_000), allowed_lateness_ms=60_000)
        .aggregate("sessions", clicks=agg.count(), pages=agg.custom(_DistinctUrls()))
    )
    sql = testing.run(load_job(EXAMPLES / "user_sessions.sql"), clicks)
    assert sql.results and sql.results == testing.run(job, clicks).results


class _DistinctUrls:
    def create(self) -> dict[str, int]:
        return {}

    def add(self, acc: dict[str, int], record: dict[str, Any]) -> dict[str, int]:
        return {**acc, f"str:{record['url']}": 1}

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {**a, **b}

    def result(self, acc: dict[str, int]) -> int:
        return len(acc)


def _docs_sql_blocks() -> list[str]:
    blocks: list[str] = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        blocks += re.findall(r"```sql[^\n]*\n(.*?)```", text, flags=re.DOTALL)
    return blocks


def test_the_docs_have_sql_examples() -> None:
    assert len(_docs_sql_blocks()) >= 1


@pytest.mark.parametrize("block", _docs_sql_blocks(), ids=lambda b: b.split("\n")[0][:40])
def test_every_docs_sql_block_is_an_example_file(block: str) -> None:
    """A page's SQL is a file it includes (a test runs it) or text of one of the example files."""
    include = re.fullmatch(r'--8<-- "([^"]+)"\n', block)
    if include:
        assert (ROOT / "docs" / include.group(1)).is_file(), include.group(1)
        return
    files = [p.read_text(encoding="utf-8") for p in SQL_FILES]
    assert any(block in f for f in files), f"docs sql block not in app/examples/*.sql:\n{block}"
