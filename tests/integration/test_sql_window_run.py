"""SQL window joins, window Top-N and window deduplication (issue 43) in a real ``weir run``
at parallelism 2: the rows a file sink gets equal the brute-force model's (late rows, judged by
the file's watermark, join and rank nothing), each key's result of its last window answers at
``/{job}/{view}/state/{key}``, and a pull query reads those rows as a table; a kill -9 of the
whole run restored at parallelism 3 leaves every sink exactly once (the open windows are keyed
state, re-cut by key groups)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.integration.test_checkpoints import crash_at_2_then_finish_at_3
from tests.support import WeirServer, event_lines, make_events, read_jsonl, write_lines
from weir.engine.windows import MIN_TIME, is_late
from weir.state.keygroups import canonical_key

BOUND, SIZE = 200, 1_000
JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources

job = Job("sqlwin", max_parallelism=128)
ads = job.source(sources.jsonl(SOURCE), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
ads = ads.filter(lambda e: SLOW)
TVF = "TABLE(TUMBLE(TABLE ads, DESCRIPTOR(ts), INTERVAL '1' SECOND))"
job.sql("clicked", "SELECT L.id, L.window_start AS ws, L.ts AS lts, L.`value` AS lv, "
        "R.ts AS rts, R.`value` AS rv "
        f"FROM (SELECT * FROM {TVF} WHERE event = 'impression') L LEFT JOIN "
        f"(SELECT * FROM {TVF} WHERE event = 'click') R "
        "ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.id = R.id",
        tables={"ads": ads}).sink(sinks.jsonl(OUT + "/clicked.jsonl"))
job.sql("best", "SELECT id, ts, `value`, window_start, rn FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY window_start, window_end, id ORDER BY `value` DESC) AS rn "
        f"FROM {TVF} WHERE event = 'impression') WHERE rn <= 2",
        tables={"ads": ads}).sink(sinks.jsonl(OUT + "/best.jsonl"))
job.sql("latest", "SELECT id, ts, `value`, window_start FROM (SELECT *, ROW_NUMBER() OVER "
        f"(PARTITION BY window_start, window_end, id ORDER BY ts DESC) AS rn FROM {TVF}) "
        "WHERE rn = 1", tables={"ads": ads}).sink(sinks.jsonl(OUT + "/latest.jsonl"))
"""


SLOW = "time.sleep(0.0005) is None"  # ~0.5 ms a record: the kill lands mid-run


def _job(tmp_path: Path, src: Path, slow: str = "True") -> Path:
    path = tmp_path / "job.py"
    text = JOB.replace("SOURCE", repr(str(src))).replace("OUT", repr(str(tmp_path)))
    path.write_text(text.replace("SLOW", slow), encoding="utf-8")
    return path


def _on_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records not late for their window under the file's watermark (max ts - bound - 1)."""
    out, top = [], MIN_TIME
    for e in events:
        wm = MIN_TIME if top == MIN_TIME else top - BOUND - 1
        if not is_late(e["ts"] - e["ts"] % SIZE + SIZE, 0, wm):
            out.append(e)
        top = max(top, e["ts"])
    return out


def _left_join(events: list[dict[str, Any]]) -> dict[str, dict[int, Counter[tuple[Any, ...]]]]:
    """Per key and window start, the LEFT window join's rows."""
    cells: dict[tuple[str, int], tuple[list[Any], list[Any]]] = defaultdict(lambda: ([], []))
    for e in _on_time(events):
        cells[(canonical_key(e["id"]), e["ts"] - e["ts"] % SIZE)][e["event"] == "click"].append(e)
    out: dict[str, dict[int, Counter[tuple[Any, ...]]]] = defaultdict(dict)
    for (key, ws), (imps, clicks) in cells.items():
        if not imps:
            continue
        rows = Counter(
            (ws, i["ts"], i["value"], c["ts"] if c else None, c["value"] if c else None)
            for i in imps
            for c in (clicks or [None])
        )
        out[key][ws] = rows
    return dict(out)


def _row(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["ws"], r["lts"], r["lv"], r["rts"], r["rv"])


def test_a_window_join_equals_the_model_and_serves_each_keys_last_window(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(4_000, seed=43)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    server = weir_server(_job(tmp_path, src), "--parallelism", "2", state_dir=tmp_path / "st")
    server.wait_finished()
    want = _left_join(events)
    got: dict[str, dict[int, Counter[tuple[Any, ...]]]] = defaultdict(dict)
    for r in read_jsonl(tmp_path / "clicked.jsonl"):
        assert r["op"] == "clicked"
        got[r["key"]].setdefault(r["ws"], Counter())[_row(r)] += 1
    assert dict(got) == want
    assert sum(len(c) for w in want.values() for c in w.values()) > 1_000
    c = server.client()
    for key in ("ad-0", "a/b", "17"):
        answer = c.get(f"/sqlwin/clicked/state/{quote(key, safe='')}")
        assert answer.status_code == 200, answer.text
        last = answer.json()["state"]["last"]
        ws = max(want[key])
        assert last["window_start"] == ws and last["window_end"] == ws + SIZE
        assert Counter(_row(r) for r in last["rows"]) == want[key][ws]


def _top2(events: list[dict[str, Any]]) -> dict[str, dict[int, list[tuple[Any, ...]]]]:
    """Per key and window start, the two impressions of largest value (ties: first come)."""
    cells: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for e in _on_time(events):
        if e["event"] == "impression":
            cells[(canonical_key(e["id"]), e["ts"] - e["ts"] % SIZE)].append(e)
    out: dict[str, dict[int, list[tuple[Any, ...]]]] = defaultdict(dict)
    for (key, ws), rows in cells.items():
        ranked = sorted(rows, key=lambda e: -e["value"])[:2]
        out[key][ws] = [(ws, e["ts"], e["value"], rn) for rn, e in enumerate(ranked, start=1)]
    return dict(out)


def _latest(events: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[Any, ...]]:
    """The window deduplication keeping the last row by time (ties: the later arrival)."""
    out: dict[tuple[str, int], tuple[Any, ...]] = {}
    for e in _on_time(events):
        cell = (canonical_key(e["id"]), e["ts"] - e["ts"] % SIZE)
        if cell not in out or e["ts"] >= out[cell][0]:
            out[cell] = (e["ts"], e["value"])
    return out


def _latest_rows(path: Path) -> dict[tuple[str, int], tuple[Any, ...]]:
    out: dict[tuple[str, int], tuple[Any, ...]] = {}
    for r in read_jsonl(path):
        cell = (r["key"], r["window_start"])
        assert cell not in out, cell  # one row per key and window
        out[cell] = (r["ts"], r["value"])
    return out


def test_a_window_top_n_equals_the_model_and_answers_state_and_pull_queries(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(4_000, seed=44)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    server = weir_server(_job(tmp_path, src), "--parallelism", "2", state_dir=tmp_path / "st")
    server.wait_finished()
    want = _top2(events)
    got: dict[str, dict[int, list[tuple[Any, ...]]]] = defaultdict(dict)
    for r in read_jsonl(tmp_path / "best.jsonl"):
        row = (r["window_start"], r["ts"], r["value"], r["rn"])
        got[r["key"]].setdefault(r["window_start"], []).append(row)
    assert dict(got) == want
    c = server.client()
    key = "ad-1"
    ws = max(want[key])
    last = c.get(f"/sqlwin/best/state/{key}").json()["state"]["last"]
    assert [(ws, r["ts"], r["value"], r["rn"]) for r in last["rows"]] == want[key][ws]
    answer = c.post(
        "/sqlwin/sql",
        json={"query": "SELECT key, window_start, rn, `value` FROM best WHERE key = 'ad-1' "
              "ORDER BY rn"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [
        {"key": key, "window_start": ws, "rn": rn, "value": v} for ws, _, v, rn in want[key][ws]
    ]
    assert _latest_rows(tmp_path / "latest.jsonl") == _latest(events)
    joined = c.post("/sqlwin/sql", json={"query": "SELECT COUNT(*) AS n FROM clicked"})
    assert joined.status_code == 200, joined.text
    assert joined.json()["rows"][0]["n"] > 0


def test_both_views_are_exactly_once_across_a_kill_9_restored_at_another_parallelism(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(6_000, seed=45)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    crash_at_2_then_finish_at_3(weir_server, _job(tmp_path, src, SLOW), tmp_path / "st")
    joined: dict[str, dict[int, Counter[tuple[Any, ...]]]] = defaultdict(dict)
    for r in read_jsonl(tmp_path / "clicked.jsonl"):
        joined[r["key"]].setdefault(r["ws"], Counter())[_row(r)] += 1
    assert dict(joined) == _left_join(events)  # no row lost, none twice
    ranked: dict[str, dict[int, list[tuple[Any, ...]]]] = defaultdict(dict)
    for r in read_jsonl(tmp_path / "best.jsonl"):
        row = (r["window_start"], r["ts"], r["value"], r["rn"])
        ranked[r["key"]].setdefault(r["window_start"], []).append(row)
    assert dict(ranked) == _top2(events)
    assert _latest_rows(tmp_path / "latest.jsonl") == _latest(events)
