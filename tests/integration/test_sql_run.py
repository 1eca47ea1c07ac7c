"""SQL jobs as real ``weir`` processes: ``weir sql JOB.sql --exit-at-end`` on a JSONL file gives
the brute-force model's windows; a served SQL job answers a composite key over HTTP (uvicorn on
loopback, httpx); ``weir backfill JOB.sql`` of a CUMULATE view on Spark gives the windows
streaming gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    write_lines,
)
from tests.support.backfill import backfill_in_process
from tests.support.reference import Spec, group_emissions, simulate
from weir import testing
from weir.engine.agg import avg_of
from weir.engine.runtime.loader import load_job
from weir.engine.sql import composite_key

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
AGGS = ("count", "total", "lo", "hi", "avg")


def _job(source: Path, name: str = "sqljob") -> str:
    return f"""
SET 'pipeline.name' = '{name}';
CREATE TABLE events (id STRING, event STRING, ts BIGINT, `value` BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '201' MILLISECOND)
WITH ('url' = 'file://{source}', 'allowed-lateness' = '1500 ms');

CREATE VIEW imps AS
SELECT id, window_start, window_end, COUNT(*) AS `count`, SUM(`value`) AS total,
       MIN(`value`) AS lo, MAX(`value`) AS hi, AVG(`value`) AS `avg`
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND))
WHERE event = 'impression'
GROUP BY id, window_start, window_end;

CREATE VIEW by_event AS
SELECT id, event, TUMBLE_START(ts, INTERVAL '1' SECOND), TUMBLE_END(ts, INTERVAL '1' SECOND),
       COUNT(*) AS n, SUM(`value` * 2) AS doubled
FROM events
GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), id, event;

CREATE VIEW cumul AS
SELECT id, event, window_start, window_end, COUNT(*) AS n, SUM(`value` * 2) AS doubled
FROM TABLE(CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '250' MILLISECOND,
                    INTERVAL '1' SECOND))
GROUP BY id, event, window_start, window_end;
"""


def _sql_avg(emissions: dict[Any, list[dict[str, Any]]]) -> dict[Any, list[dict[str, Any]]]:
    """The model's windows with SQL's AVG of a BIGINT column: integral, truncated toward 0."""
    return {
        k: [{**r, "avg": avg_of(r["total"], r["count"])} for r in rs] for k, rs in emissions.items()
    }


def test_weir_sql_on_a_file_gives_the_reference_windows_and_serves_a_composite_key(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    weir_server: Callable[..., WeirServer],
) -> None:
    lines = event_lines(make_events(3_000, seed=31))
    src = write_lines(tmp_path / "events.jsonl", lines)
    job = tmp_path / "job.sql"
    job.write_text(_job(src))
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    r = run_weir("sql", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(state), "--parallelism", "2")  # fmt: skip
    assert r.rc == 0, r.stderr
    ref = simulate(lines, SPEC)  # SQL's max(ts) - 201 is the model's bound 200 (max - 200 - 1)
    results = read_jsonl(out)
    # three views, one sink: every record names the view that produced it (issue 39, item 5)
    assert {x["op"] for x in results} == {"imps", "by_event", "cumul"}
    imps = [x for x in results if x["op"] == "imps"]
    assert group_emissions(imps) == _sql_avg(ref.emissions)
    late = [x["record"] for x in read_jsonl(state / "sqljob" / "late.jsonl") if x["op"] == "imps"]
    want_late = [{**x["record"], "id": str(x["record"]["id"])} for x in ref.late]  # id STRING
    assert sorted(map(json.dumps, late)) == sorted(map(json.dumps, want_late))

    # the same job served: a composite key over HTTP, against the in-process run of the job
    want = testing.run(load_job(job), [json.loads(line) for line in lines]).by_operator
    server = weir_server(job, "--parallelism", "2")
    server.wait_finished()
    client = server.client()
    key = composite_key("a/b", "click")
    got = client.get(f"/sqljob/by_event/state/{quote(key, safe='')}", params={"limit": 10_000})
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["key"] == "a/b|click"
    expected = {}
    for x in want["by_event"]:
        if x["key"] == key:
            expected[(x["start"], x["end"])] = (x["n"], x["doubled"])
    assert expected
    assert {(w["start"], w["end"]): (w["n"], w["doubled"]) for w in body["windows"]} == expected
    assert client.get("/sqljob/by_event/state/a%2Fb").status_code == 404  # one column: no key


def test_weir_backfill_of_a_sql_cumulate_view_gives_the_streamed_windows(
    tmp_path: Path, spark: Any, weir_server: Callable[..., WeirServer]
) -> None:
    lines = event_lines(make_events(2_000, seed=32))
    src = write_lines(tmp_path / "history.jsonl", lines)
    job = tmp_path / "job.sql"
    job.write_text(_job(src, name="sqlback"))
    r = backfill_in_process(spark, tmp_path, str(job), "--input", str(src), "--op", "cumul",
                            "--into-savepoint", str(tmp_path / "sp"))  # fmt: skip
    assert r.rc == 0, r.stderr[-3000:]
    savepoint = json.loads(r.stdout.strip().splitlines()[-1])["savepoint"]
    empty = write_lines(tmp_path / "empty.jsonl", [])
    server = weir_server(job, "--restore", savepoint, "--source", f"file://{empty}",
                         state_dir=tmp_path / "restored")  # fmt: skip
    server.wait_finished()
    streamed = testing.run(load_job(job), [json.loads(line) for line in lines]).by_operator
    final: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    for x in streamed["cumul"]:
        final.setdefault(x["key"], {})[(x["start"], x["end"])] = (x["n"], x["doubled"])
    client = server.client()
    for key in sorted(final)[:6]:
        got = client.get(f"/sqlback/cumul/state/{quote(key, safe='')}",
                         params={"limit": 10_000})  # fmt: skip
        assert got.status_code == 200, (key, got.text)
        windows = {(w["start"], w["end"]): (w["n"], w["doubled"]) for w in got.json()["windows"]}
        assert windows == final[key], key
