"""Flink's window-aggregate cases as a user runs them (issue 41): a ``.sql`` job over a JSONL file,
served by ``weir run --parallelism N`` for N = 1, 2 and 4 (uvicorn on loopback, httpx), answers
every key's windows with Flink's expected rows, the NULL group key included at its path form
``\\N`` (``GET …/state/%5CN``; ``weir.client``'s ``state(…, key=None)``); and a continuous
trigger on global and session windows in ``weir run`` emits the same results at every
parallelism (once at the end of the input)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support import WeirResult, WeirServer, read_jsonl, write_lines
from tests.support.flink_sql_cases import WINDOW_DATA, WINDOW_TABLE, flink_row, row
from tests.unit.test_flink_sql_windows import CASES, Case
from weir.client import Client

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT)}  # the job registers tests.support.flink_sql_cases.ConcatDistinct
NAMES = {
    "tumble": "WindowAggregateITCase.testEventTimeTumbleWindow",
    "day_minus_8h": "WindowAggregateITCase.testEventTimeTumbleWindowWithNegativeOffset",
    "hop": "WindowAggregateITCase.testEventTimeHopWindow",
    "cumulate_8h": "WindowAggregateITCase.testEventTimeCumulateWindowWithOffset",
    "window_time": "WindowAggregateITCase.testTumbleWindowOutputWindowTime",
}
BY_NAME = {c.flink_test: c for c in CASES}
KEYS = ("a", "b", None)


def _job(tmp_path: Path) -> Path:
    src = write_lines(tmp_path / "t1.jsonl", [json.dumps(e) for e in WINDOW_DATA])
    table = WINDOW_TABLE.replace("file:///unused.jsonl", f"file://{src}")
    views = "\n".join(f"CREATE VIEW {v} AS {BY_NAME[t].view};" for v, t in NAMES.items())
    job = tmp_path / "flink.sql"
    job.write_text(f"SET 'pipeline.name' = 'flink';\n{table}\n{views}\n")
    return job


def _rows(case: Case, answers: list[dict[str, Any]]) -> list[str]:
    """Each key's windows from its point answers, as Flink's rows."""
    results = [{"key": a["key"], **w} for a in answers for w in a["windows"]]
    assert all(r["final"] for r in results)
    return sorted(row(r, case.columns) for r in results)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_a_served_sql_job_answers_flinks_rows_null_key_included(
    tmp_path: Path, weir_server: Callable[..., WeirServer], parallelism: int
) -> None:
    server = weir_server(_job(tmp_path), "--parallelism", str(parallelism), env=ENV)
    server.wait_finished()
    http = server.client()
    for view, flink_test in NAMES.items():
        case = BY_NAME[flink_test]
        answers = []
        for key in KEYS:
            path = "%5CN" if key is None else quote(key, safe="")
            got = http.get(f"/flink/{view}/state/{path}", params={"limit": 1_000})
            assert got.status_code == 200, (view, key, got.text)
            assert got.json()["key"] == key  # null in the body, \N in the path
            answers.append(got.json())
        assert _rows(case, answers) == sorted(flink_row(x, case.columns) for x in case.expected)
    assert http.get("/flink/tumble/state/null").status_code == 404  # the string: no such key
    with Client(server.base_url, trust_env=False) as client:
        answer = client.state("flink", "tumble", None)
    assert answer.key is None
    assert [(w.start, w.model_dump()["c"]) for w in answer.windows] == [(1_602_288_030_000, 1)]


CONTINUOUS_JOB = """from weir import Job, WatermarkStrategy, agg, sources, triggers, windows

job = Job("cont", max_parallelism=128)
events = job.source(sources.jsonl({src!r}), timestamp="ts",
                    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=50))
(events.key_by("id").window(windows.global_windows())
    .trigger(triggers.continuous_event_time(200))
    .aggregate("global_", n=agg.count(), total=agg.sum("v")))
(events.key_by("id").window(windows.session(gap_ms=40), allowed_lateness_ms=30)
    .trigger(triggers.continuous_event_time(25))
    .aggregate("sessions", sn=agg.count(), stotal=agg.sum("v")))
"""


def test_continuous_triggers_give_the_same_results_at_every_parallelism(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    recs = [
        {"id": f"k{(i * 7) % 5}", "ts": i * 13 - (60 if i % 11 == 0 else 0), "v": i % 9}
        for i in range(400)
    ]
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(r) for r in recs])
    job = tmp_path / "cont.py"
    job.write_text(CONTINUOUS_JOB.format(src=str(src)))
    outputs = []
    for p in (1, 2, 4):
        out = tmp_path / f"out{p}.jsonl"
        r = run_weir("run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port",
                     "0", "--state-dir", str(tmp_path / f"state{p}"), "--parallelism", str(p),
                     "--batch-size", "16")  # fmt: skip
        assert r.rc == 0, r.stderr[-2000:]
        outputs.append(sorted(json.dumps(x, sort_keys=True) for x in read_jsonl(out)))
    assert outputs[0] == outputs[1] == outputs[2]
    results = [json.loads(x) for x in outputs[0]]
    finals = Counter((x["key"], x["start"], x["end"]) for x in results if "sn" in x and x["final"])
    assert finals and set(finals.values()) == {1}  # each session final once
    most: dict[str, int] = {}
    for x in results:
        if "n" in x:
            most[x["key"]] = max(most.get(x["key"], 0), x["n"])
    assert most == {f"k{i}": 80 for i in range(5)}  # a global window never drops a record
    ends = [x for x in results if "n" in x and x["n"] == 80]
    assert sorted(x["key"] for x in ends) == [f"k{i}" for i in range(5)]  # fired once at the end


BACKFILL_VIEW = """CREATE VIEW stats AS
SELECT name, window_start, window_end, window_time, COUNT(*) AS c, COUNT(`double`) AS cd,
       SUM(bigdec) AS s, MAX(`double`) AS mx, MIN(`float`) AS mn, AVG(`int`) AS avg_int,
       CAST(AVG(`double`) AS INT) AS avg_cast, SUM(`int`) AS si
FROM TABLE(TUMBLE(TABLE T1, DESCRIPTOR(ts), INTERVAL '5' SECOND))
GROUP BY name, window_start, window_end;"""


def test_weir_backfill_of_a_sql_view_with_nulls_gives_the_streamed_windows(
    tmp_path: Path, run_weir: Callable[..., WeirResult], weir_server: Callable[..., WeirServer]
) -> None:
    """Spark's native aggregates pass over NULLs as SQL's do: the backfilled windows of every
    key, the NULL one included, equal the streamed ones, value for value and type for type."""
    from weir import testing
    from weir.engine.sql import load_script

    src = write_lines(tmp_path / "t1.jsonl", [json.dumps(e) for e in WINDOW_DATA])
    table = WINDOW_TABLE.replace("file:///unused.jsonl", f"file://{src}")
    job = tmp_path / "back.sql"
    job.write_text(f"SET 'pipeline.name' = 'back';\n{table}\n{BACKFILL_VIEW}\n")
    r = run_weir("backfill", str(job), "--input", str(src), "--master", "local[2]", "--op",
                 "stats", "--into-savepoint", str(tmp_path / "sp"), timeout=240,
                 env=ENV)  # fmt: skip
    assert r.rc == 0, r.stderr[-3000:]
    savepoint = json.loads(r.stdout.strip().splitlines()[-1])["savepoint"]
    empty = write_lines(tmp_path / "empty.jsonl", [])
    server = weir_server(job, "--restore", savepoint, "--source", f"file://{empty}",
                         state_dir=tmp_path / "restored", env=ENV)  # fmt: skip
    server.wait_finished()
    streamed = testing.run(load_script(job), WINDOW_DATA).by_operator["stats"]
    want: dict[Any, list[dict[str, Any]]] = {}
    for x in streamed:
        want.setdefault(x["key"], []).append({k: v for k, v in x.items() if k not in ("op", "key")})
    http = server.client()
    for key in KEYS:
        path = "%5CN" if key is None else key
        got = http.get(f"/back/stats/state/{path}", params={"limit": 1_000})
        assert got.status_code == 200, (key, got.text)
        windows = got.json()["windows"]
        assert windows == want[key], key
        assert [type(w["avg_int"]) for w in windows] == [int] * len(windows)
    assert any(w["mx"] is None for w in want["a"])  # a window of only NULLs: NULL
