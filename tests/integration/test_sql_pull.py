"""Pull queries (``POST /{job}/sql``, ``Client.sql``, ``weir query``) against a real ``weir run``
serving a finished job of a window view and a continuous aggregate view (parallelism 2, behind
an API token): each form's rows equal the model's (the in-process run of the same job), live and
committed; the scan budget pages or refuses; a poll with the ETag gets a 304; anything but a
read-only SELECT of one of the job's operators is refused with the reason."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import (
    WEIR,
    WeirServer,
    event_lines,
    make_events,
    wait_until,
    write_lines,
)
from weir import testing
from weir.client import BadRequest, Client
from weir.engine.runtime.loader import load_job

TOKEN = "pull-query-token-0123456789"
JOB = """
from weir import Job, WatermarkStrategy, sources

job = Job("pull", max_parallelism=128)
events = job.source(sources.jsonl(SOURCE), timestamp="ts",
                    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
job.sql("totals", "SELECT id, COUNT(*) AS n, SUM(`value`) AS total FROM events GROUP BY id",
        tables={"events": events}, state_ttl_ms=0)
job.sql("imps", "SELECT id, window_start, window_end, COUNT(*) AS n, MAX(`value`) AS top "
        "FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
        "WHERE event = 'impression' GROUP BY id, window_start, window_end",
        tables={"events": events}, allowed_lateness_ms=10_000)
job.sql("best", "SELECT id, ts, `value`, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id "
        "ORDER BY `value` DESC) AS rn FROM events) WHERE rn <= 2", tables={"events": events})
"""


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
    module_weir_server: Callable[..., WeirServer],
) -> Iterator[tuple[WeirServer, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("pull")
    events = make_events(3_000, seed=43)
    src = write_lines(root / "in.jsonl", event_lines(events))
    job = root / "job.py"
    job.write_text(JOB.replace("SOURCE", repr(str(src))), encoding="utf-8")
    server = module_weir_server(
        job, "--parallelism", "2", "--checkpoint-interval-ms", "150",
        state_dir=root / "state", env={"WEIR_API_TOKEN": TOKEN},
    )  # fmt: skip
    c = _client(server)
    wait_until(lambda: c.get("/jobs/pull").json()["state"] == "finished", 60.0, what="the end")
    wait_until(lambda: (c.get("/jobs/pull").json().get("last_checkpoint") or 0) > 0, 30.0,
               what="a checkpoint")  # fmt: skip
    yield server, _model(job, events)


def _client(server: WeirServer) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {TOKEN}"},
                        trust_env=False, timeout=30.0)  # fmt: skip


def _model(job: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The tables as the in-process run of the same job leaves them: each key's last row, each
    window's last emission."""
    out = testing.run(load_job(job), events).by_operator
    changelog = ("op", "row_kind")
    totals = {r["key"]: {k: v for k, v in r.items() if k not in changelog} for r in out["totals"]}
    imps = {}
    for r in out["imps"]:
        imps[(r["key"], r["start"])] = {"key": r["key"], "window_start": r["start"],
                                        "window_end": r["end"], "n": r["n"], "top": r["top"],
                                        "final": True}  # fmt: skip
    best = {(r["key"], r["rn"]): {k: v for k, v in r.items() if k not in changelog}
            for r in out["best"]}  # fmt: skip
    return {"totals": totals, "imps": imps, "best": best}


def _ask(server: WeirServer, query: str, **body: Any) -> httpx.Response:
    with _client(server) as c:
        return c.post("/pull/sql", json={"query": query, **body})


@pytest.mark.parametrize("consistency", ["live", "committed"])
def test_point_lookups_and_a_filtered_listing_equal_the_model(
    served: tuple[WeirServer, dict[str, Any]], consistency: str
) -> None:
    server, model = served
    totals = model["totals"]
    r = _ask(server, "SELECT key, n, total FROM totals WHERE key IN ('ad-0', 'a/b', 'nope')",
             consistency=consistency)  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["keys_read"] == 3 and body["consistency"] == consistency
    assert body["columns"] == ["key", "n", "total"]
    want = [{"key": k, "n": totals[k]["n"], "total": totals[k]["total"]} for k in ("a/b", "ad-0")]
    assert body["rows"] == want
    r = _ask(server, "SELECT * FROM totals WHERE key LIKE 'ad-%' AND n > 100 AND total >= 0",
             consistency=consistency)  # fmt: skip
    rows = r.json()["rows"]
    expected = [
        v for k, v in totals.items() if k.startswith("ad-") and v["n"] > 100 and v["total"] >= 0
    ]
    assert sorted(rows, key=lambda x: x["key"]) == sorted(expected, key=lambda x: x["key"])
    assert rows and r.json()["keys_read"] == sum(k.startswith("ad-") for k in totals)


def test_order_limit_aggregates_and_windows_equal_the_model(
    served: tuple[WeirServer, dict[str, Any]],
) -> None:
    server, model = served
    totals, imps = model["totals"], model["imps"]
    rows = _ask(server, "SELECT key, n FROM totals ORDER BY n DESC, key LIMIT 3").json()["rows"]
    ranked = sorted(totals.values(), key=lambda v: (-v["n"], v["key"]))[:3]
    assert rows == [{"key": v["key"], "n": v["n"]} for v in ranked]
    body = _ask(server, "SELECT COUNT(*) AS keys, SUM(n) AS events, MAX(total) FROM totals").json()
    assert body["rows"] == [{"keys": len(totals), "events": sum(v["n"] for v in totals.values()),
                             "max(total)": max(v["total"] for v in totals.values())}]  # fmt: skip
    starts = sorted({s for _, s in imps})
    lo = starts[len(starts) // 2]
    r = _ask(server, f"SELECT * FROM imps WHERE key = 'ad-1' AND window_start >= {lo} AND n > 2")
    want = sorted((v for (k, s), v in imps.items() if k == "ad-1" and s >= lo and v["n"] > 2),
                  key=lambda v: v["window_start"])  # fmt: skip
    assert want and r.json()["rows"] == want


def test_the_scan_budget_pages_by_cursor_or_refuses(
    served: tuple[WeirServer, dict[str, Any]],
) -> None:
    server, model = served
    rows, cursor, pages = [], None, 0
    while True:
        body = _ask(server, "SELECT key, n FROM totals", budget=3, cursor=cursor).json()
        assert body["keys_read"] <= 3
        rows += body["rows"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages >= 3  # the ads' 8 keys, 3 at a time
    assert sorted(r["key"] for r in rows) == sorted(model["totals"])  # each key exactly once
    r = _ask(server, "SELECT key, n FROM totals ORDER BY n", budget=3)
    assert r.status_code == 400 and r.json()["error"]["code"] == "scan_budget_exceeded"
    assert "scan budget of 3" in r.json()["error"]["message"]
    r = _ask(server, "SELECT n FROM totals WHERE key IN ('a', 'b', 'c', 'd')", budget=3)
    assert r.status_code == 400 and "names 4 keys, more than its scan budget of 3" in r.text


def test_an_etag_poll_gets_a_304_and_the_client_and_the_command_line_ask_the_same(
    served: tuple[WeirServer, dict[str, Any]], tmp_path: Path
) -> None:
    server, model = served
    query = "SELECT key, n FROM totals WHERE key = 'ad-2'"
    with _client(server) as c:
        first = c.post("/pull/sql", json={"query": query})
        again = c.post("/pull/sql", json={"query": query},
                       headers={"If-None-Match": first.headers["ETag"]})  # fmt: skip
    assert first.status_code == 200 and again.status_code == 304
    with Client(server.base_url, token=TOKEN) as client:
        answer = client.sql("pull", query, consistency="committed")
        assert answer.rows == [{"key": "ad-2", "n": model["totals"]["ad-2"]["n"]}]
        with pytest.raises(BadRequest, match="unknown table 'nope'"):
            client.sql("pull", "SELECT * FROM nope")
    env = {**os.environ, "WEIR_API_TOKEN": TOKEN, "NO_PROXY": "*"}
    out = subprocess.run(
        [*WEIR, "query", "pull", query, "--api-url", server.base_url, "--json"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == answer.rows
    text = subprocess.run(
        [*WEIR, "query", "pull", query, "--api-url", server.base_url],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    ).stdout  # fmt: skip
    assert text.splitlines()[1].split() == ["ad-2", str(model["totals"]["ad-2"]["n"])]


REFUSED = {
    "delete": ("DELETE FROM totals", "one SELECT over one of the job's operators"),
    "two statements": ("SELECT * FROM totals; SELECT * FROM imps", "got 2 statement"),
    "a table function": ("SELECT * FROM read_csv('/etc/passwd')", "reads FROM one of the job's"),
    "a file function": ("SELECT key FROM totals WHERE LOAD_FILE('/etc/passwd') = 'x'", "LOAD_FILE"),
    "a join": ("SELECT * FROM totals JOIN imps ON totals.key = imps.key", "JOIN in a pull query"),
    "a subquery": ("SELECT * FROM totals WHERE key IN (SELECT key FROM imps)", "subquery"),
    "group by": ("SELECT key, COUNT(*) FROM imps GROUP BY key", "GROUP BY in a pull query"),
    "unknown column": ("SELECT nope FROM totals", "unknown column 'nope' in 'totals'"),
    "a type error over the rows": ("SELECT key FROM totals WHERE n > 'a'", "query_failed"),
    "nesting": ("SELECT key FROM totals WHERE " + "(" * 40 + "n > 1" + ")" * 40, "nest deeper"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_anything_but_a_read_only_select_is_refused_with_the_reason(
    served: tuple[WeirServer, dict[str, Any]], case: str
) -> None:
    query, reason = REFUSED[case]
    r = _ask(served[0], query)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    if reason == "query_failed":  # valid SQL whose evaluation fails: named, never a 500
        assert error["code"] == "query_failed" and "CAST them" in error["message"]
        return
    assert error["code"] == "invalid_query" and reason in error["message"]


def test_limits_and_auth_hold(served: tuple[WeirServer, dict[str, Any]]) -> None:
    server, _ = served
    r = _ask(server, "SELECT key FROM totals WHERE key IN (" + ", ".join(["'k'"] * 5_000) + ")")
    assert r.status_code == 422  # past the query's size limit, refused before it is parsed
    with httpx.Client(base_url=server.base_url, trust_env=False) as anonymous:
        r = anonymous.post("/pull/sql", json={"query": "SELECT * FROM totals"})
    assert r.status_code == 401


def test_a_top_n_view_answers_its_ranked_rows(served: tuple[WeirServer, dict[str, Any]]) -> None:
    server, model = served
    query = "SELECT key, rn, value FROM best WHERE key IN ('ad-0', 'ad-1') ORDER BY key, rn"
    rows = _ask(server, query).json()["rows"]
    want = [{"key": k, "rn": rn, "value": v["value"]}
            for (k, rn), v in sorted(model["best"].items()) if k in ("ad-0", "ad-1")]  # fmt: skip
    assert len(want) == 4 and rows == want
    with _client(server) as c:
        state = c.get("/pull/best/state/ad-0").json()["state"]["rows"]
    assert [r["value"] for r in state] == [w["value"] for w in want if w["key"] == "ad-0"]
