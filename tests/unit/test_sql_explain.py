"""``weir explain JOB``: the operator graph of a Python job and of a SQL job, as text and JSON,
from the one description next to the job API (``weir.engine.explain``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weir.app.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "app" / "examples"
DEMO = Path(__file__).resolve().parents[2] / "app" / "demo_job.py"


@pytest.fixture(autouse=True)
def _columnar_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """The graphs below say how each key_by runs by default, whatever WEIR_COLUMNAR is."""
    monkeypatch.delenv("WEIR_COLUMNAR", raising=False)


def _explain(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["explain", *args]) == 0
    return capsys.readouterr().out


def test_explain_a_sql_job_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    graph = json.loads(_explain(capsys, str(EXAMPLES / "ad_stats.sql"), "--json"))
    assert graph["job"] == "ad-stats-sql"
    (source,) = graph["sources"]
    assert source["source"].startswith("generator://ads")
    # SQL's watermark is max(ts) - 2 s: the DataStream rule's max - bound - 1 with bound 1999
    assert (source["timestamp"], source["watermark_bound_ms"]) == ("ts", 1_999)
    (check,) = source["children"]
    assert check["type"] == "map"
    assert check["function"] == "CHECK events(id STRING, event STRING, ts BIGINT, value DOUBLE)"
    filtered, by_event = check["children"]
    assert filtered == {
        "type": "filter",
        "function": "WHERE event = 'impression'",
        "children": [
            {
                "type": "key_by",
                "key": "id",
                # SQL's NULL-skipping aggregates fold on columns (issue 38, phase 3)
                "execution": "columns",
                "operators": [
                    {
                        "name": "impressions",
                        "type": "window",
                        "window": {"type": "tumbling", "size_ms": 10_000, "time": "event"},
                        "allowed_lateness_ms": 5_000,
                        "aggregates": {
                            "impressions": "count(*)",
                            "total": "sum(value, nulls=skip)",
                            "max_value": "max(value, nulls=skip)",
                        },
                        "sinks": [],
                    }
                ],
            }
        ],
    }
    assert by_event["key"] == "id|event"
    (op,) = by_event["operators"]
    assert op["window"] == {"type": "sliding", "size_ms": 10_000, "slide_ms": 5_000,
                            "time": "event"}  # fmt: skip
    assert op["aggregates"]["median_value"] == "MEDIAN(`value`)"


def test_explain_a_sql_job_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    text = _explain(capsys, str(EXAMPLES / "user_sessions.sql"))
    assert text.splitlines() == [
        "job user-sessions (max parallelism 128)",
        "  source file:///var/lib/weir/clicks.jsonl  time: rowtime, watermark: max - 10000 ms",
        "    map CHECK clicks(user_id STRING, url STRING, rowtime BIGINT)",
        "      filter WHERE url NOT LIKE '%/health'",
        "        key_by user_id",
        "          runs record by record (operator 'sessions' has SessionWindows)",
        "          window operator sessions: session (gap_ms=1800000, time=event), allowed "
        "lateness 60000 ms",
        "            clicks = count(*)",
        "            pages = COUNT(DISTINCT url)",
    ]


def test_explain_a_python_job(capsys: pytest.CaptureFixture[str]) -> None:
    text = _explain(capsys, str(DEMO))
    assert "    filter <lambda>\n      key_by id\n        runs on columns\n" in text
    assert "window operator impressions: tumbling (size_ms=10000, time=event)" in text
    graph = json.loads(_explain(capsys, str(DEMO), "--json"))
    (key_by,) = graph["sources"][0]["children"][0]["children"]
    assert key_by["operators"][0]["aggregates"]["count"] == "count(*)"
