"""A SQL FULL OUTER interval join, a LEFT temporal join and a LEFT lookup join (issue 43) in
real ``weir run`` processes: the first two equal the brute-force models'
(``tests/support/sql_join_reference.py``, late records included) at parallelism 2, and stay
exactly once across a kill -9 of the whole run at parallelism 2 and a restore at parallelism 3
(both keep their buffers, the outer join's "joined" flags and the temporal join's waiting
probe rows and versions, as keyed state); the lookup join, whose rows depend on arrival,
emits every impression exactly once with a click of its ad or NULLs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_checkpoints import crash_at_2_then_finish_at_3
from tests.integration.test_joins import arrivals_of
from tests.support import (
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.sql_join_reference import outer_interval_join, temporal_join

LOWER, UPPER = -150, 60  # test_joins' bounds, with its watermark bound of 200 ms
JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources

job = Job("sqljoins", max_parallelism=128)
ads = job.source(sources.jsonl(SOURCE), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
ads = ads.filter(lambda e: SLOW)
tables = {"imps": ads.filter(lambda e: e["event"] == "impression"),
          "clicks": ads.filter(lambda e: e["event"] == "click")}
COLUMNS = "SELECT i.ts AS lts, i.`value` AS lv, c.ts AS rts, c.`value` AS rv "
job.sql("outer", COLUMNS + "FROM imps AS i FULL JOIN clicks AS c ON i.id = c.id "
        "AND c.ts BETWEEN i.ts - INTERVAL '150' MILLISECOND AND i.ts + INTERVAL '60' MILLISECOND",
        tables=tables).sink(sinks.jsonl(OUT + "/outer.jsonl"))
job.sql("rated", COLUMNS + "FROM imps AS i LEFT JOIN clicks FOR SYSTEM_TIME AS OF i.ts AS c "
        "ON i.id = c.id", tables=tables, primary_keys={"clicks": ("id",)}
        ).sink(sinks.jsonl(OUT + "/temporal.jsonl"))
job.sql("looked", COLUMNS + "FROM imps AS i LEFT JOIN clicks FOR SYSTEM_TIME AS OF PROCTIME() "
        "AS c ON i.id = c.id", tables=tables, primary_keys={"clicks": ("id",)}
        ).sink(sinks.jsonl(OUT + "/lookup.jsonl"))
"""
SLOW = "time.sleep(0.0005) is None"  # ~0.5 ms a record: the crash lands mid-run


def _job(tmp_path: Path, src: Path, slow: str) -> Path:
    text = JOB.replace("SOURCE", repr(str(src))).replace("OUT", repr(str(tmp_path)))
    path = tmp_path / "job.py"
    path.write_text(text.replace("SLOW", slow), encoding="utf-8")
    return path


def _row(left: Any, right: Any) -> tuple[Any, ...]:
    lrec = dict(left) if left is not None else {}
    rrec = dict(right) if right is not None else {}
    return (lrec.get("ts"), lrec.get("value"), rrec.get("ts"), rrec.get("value"))


def _want(events: list[dict[str, Any]]) -> tuple[Counter[Any], Counter[Any]]:
    arrivals = arrivals_of(events)
    outer = outer_interval_join(arrivals, "FULL", LOWER, UPPER)
    rated, late = temporal_join(arrivals, left_join=True)
    padded = [k for k in outer if None in k[1:]]
    assert len(padded) > 100 and len(outer) > len(padded) + 100 and late  # every kind occurs
    assert any(k[2] is None for k in rated) and any(k[2] is not None for k in rated)
    return _rows(outer), _rows(rated)


def _rows(model: Counter[Any]) -> Counter[tuple[Any, ...]]:
    return Counter({_row(k[1], k[2]): n for k, n in model.items()})


def _got(path: Path) -> Counter[tuple[Any, ...]]:
    return Counter((r["lts"], r["lv"], r["rts"], r["rv"]) for r in read_jsonl(path))


def _check(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    outer, rated = _want(events)
    assert _got(tmp_path / "outer.jsonl") == outer  # no row lost, none twice
    assert _got(tmp_path / "temporal.jsonl") == rated
    # the lookup join's rows depend on arrival (processing time): every impression once, with
    # a click of its own ad or with NULLs
    looked = read_jsonl(tmp_path / "lookup.jsonl")
    imps = [e for e in events if e["event"] == "impression"]
    assert Counter((r["lts"], r["lv"]) for r in looked) == Counter(
        (e["ts"], e["value"]) for e in imps
    )
    clicks = {(str(e["id"]), e["ts"], e["value"]) for e in events if e["event"] == "click"}
    joined = [r for r in looked if r["rts"] is not None]
    assert len(joined) > len(looked) // 2
    assert all((r["key"], r["rts"], r["rv"]) in clicks for r in joined)


@pytest.mark.parametrize("crash", [False, True], ids=["plain-p2", "kill-9-p2-restore-p3"])
def test_outer_and_temporal_joins_are_exactly_the_models_rows(
    tmp_path: Path, weir_server: Callable[..., WeirServer], crash: bool
) -> None:
    events = make_events(5_000, seed=13)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    state = tmp_path / "state"
    job = _job(tmp_path, src, SLOW if crash else "True")
    if crash:
        crash_at_2_then_finish_at_3(weir_server, job, state)
    else:
        server = weir_server(job, "--exit-at-end", "--parallelism", "2", state_dir=state)
        assert server.proc.wait(120) == 0, server.stderr()
    _check(tmp_path, events)


LIVE_JOB = """
from weir import Job, WatermarkStrategy, sources

job = Job("live-sql-joins", max_parallelism=128)
ads = job.source(sources.generator("ads", rate=400, ids=3, seed=3), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
tables = {"imps": ads.filter(lambda e: e["event"] == "impression"),
          "clicks": ads.filter(lambda e: e["event"] == "click")}
job.sql("rated", "SELECT i.ts AS at, c.`value` AS v FROM imps AS i LEFT JOIN clicks "
        "FOR SYSTEM_TIME AS OF i.ts AS c ON i.id = c.id", tables=tables,
        primary_keys={"clicks": ("id",)})
job.sql("looked", "SELECT i.ts AS at, c.`value` AS v FROM imps AS i LEFT JOIN clicks "
        "FOR SYSTEM_TIME AS OF PROCTIME() AS c ON i.id = c.id", tables=tables,
        primary_keys={"clicks": ("id",)})
"""


def test_the_temporal_and_lookup_joins_state_answers_over_http(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """The versions a temporal join keeps (``right``, at most one at or behind the watermark)
    and a lookup join's current row answer at ``/{job}/{view}/state/{key}``."""
    path = tmp_path / "live.py"
    path.write_text(LIVE_JOB, encoding="utf-8")
    server = weir_server(path, "--parallelism", "2", state_dir=tmp_path / "state")
    c = server.client()

    def answered(view: str) -> Callable[[], dict[str, Any] | None]:
        def read() -> dict[str, Any] | None:
            r = c.get(f"/live-sql-joins/{view}/state/ad-0")
            body: dict[str, Any] = r.json()
            ok = r.status_code == 200 and body["state"].get("right") and body["watermark"]
            return body if ok else None

        return read

    rated = wait_until(answered("rated"), 30.0, what="the versions of ad-0")
    versions = rated["state"]["right"]
    assert [ts for ts, _ in versions] == sorted(ts for ts, _ in versions)
    assert all(rec["id"] == "ad-0" and rec["event"] == "click" for _, rec in versions)
    # of the versions the watermark passed one stays (5 s of slack: a live read may lag)
    assert sum(ts <= rated["watermark"] - 5_000 for ts, _ in versions) <= 1
    looked = wait_until(answered("looked"), 30.0, what="the current row of ad-0")
    current = looked["state"]["right"]
    assert current["id"] == "ad-0" and current["event"] == "click"
