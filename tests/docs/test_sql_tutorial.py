"""The SQL tutorial's job (docs/examples/clicks.sql) gives the quickstart's Python job's
results on the quickstart's events, window for window, as the page says."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from weir import testing
from weir.engine.runtime.loader import load_job

DOCS = Path(__file__).resolve().parents[2] / "docs"
QUICKSTART = DOCS / "getting-started" / "quickstart"


def _rows(results: list[dict[str, object]]) -> list[tuple[object, ...]]:
    fields = ("key", "start", "end", "views", "avg_ms", "final")
    return sorted(tuple(row[f] for f in fields) for row in results)


def test_the_sql_job_gives_the_python_jobs_windows() -> None:
    lines = (QUICKSTART / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    sql = testing.run(load_job(DOCS / "examples" / "clicks.sql"), events)
    python = testing.run(runpy.run_path(str(QUICKSTART / "job.py"))["job"], events)
    assert sql.dead == [] and sql.late == []
    assert _rows(sql.results) == _rows(python.results)
    assert len(sql.results) == 5  # five (page, minute) windows, each emitted once, final


def test_the_page_includes_the_file() -> None:
    assert '--8<-- "examples/clicks.sql"' in (DOCS / "tutorials" / "sql.md").read_text()
