"""Interval joins in SQL (issue 43) compiled onto the job API's interval join: against a
brute-force model (every pair of one key within the bounds, none of the input late) and the
equivalent job-API job, at parallelism 1, 2 and 4, for the BETWEEN and comparison forms, strict
bounds, a key of two columns and pushed-down filters; the refusals. Ported in shape from Flink's
``IntervalJoinITCase`` (``testRowTimeInnerJoinWithEquiTimeAttrs``-style bounds), derived from
Flink's documented semantics."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources, testing
from weir.engine.explain import describe
from weir.engine.sql import SqlError, SqlUnsupported, load_script
from weir.testing import Harness


def _events(n: int, seed: int) -> list[dict[str, Any]]:
    """Out of order within 400 ms (the watermark's bound is 1 s): nothing is late."""
    rng = random.Random(seed)
    out, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 40)
        out.append(
            {
                "id": rng.choice("abc"),
                "shop": rng.choice("xy"),
                "i": i,
                "kind": rng.choice(["imp", "imp", "click"]),
                "ts": clock - rng.randint(0, 400),
            }
        )
    return out


def _job(query: str, name: str = "j", **options: Any) -> Job:
    job = Job("joins")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    imps = events.filter(lambda e: e["kind"] == "imp")
    clicks = events.filter(lambda e: e["kind"] == "click")
    job.sql(name, query, tables={"imps": imps, "clicks": clicks}, **options)
    return job


def _model(
    events: list[dict[str, Any]],
    lo: int,
    hi: int,
    keys: tuple[str, ...] = ("id",),
    left_if: Any = None,
) -> Counter[tuple[Any, ...]]:
    imps = [e for e in events if e["kind"] == "imp" and (left_if is None or left_if(e))]
    clicks = [e for e in events if e["kind"] == "click"]
    return Counter(
        (a["i"], b["i"])
        for a in imps
        for b in clicks
        if all(a[k] == b[k] for k in keys) and lo <= b["ts"] - a["ts"] <= hi
    )


def _pairs(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter((r["imp"], r["click"]) for r in rows)


SELECT = "SELECT i.i AS imp, c.i AS click, c.ts AS clicked_at FROM imps AS i JOIN clicks AS c "
FORMS = {
    "between": (
        SELECT + "ON i.id = c.id AND c.ts BETWEEN i.ts - INTERVAL '100' MILLISECOND "
        "AND i.ts + INTERVAL '300' MILLISECOND",
        -100,
        300,
    ),
    "comparisons": (
        SELECT + "ON c.id = i.id AND i.ts >= c.ts - INTERVAL '0.2' SECOND "
        "AND i.ts <= c.ts + INTERVAL '50' MILLISECOND",
        -50,
        200,
    ),
    "strict": (
        SELECT + "ON i.id = c.id AND c.ts > i.ts AND c.ts < i.ts + INTERVAL '250' MILLISECOND",
        1,
        249,
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_equals_the_model_and_the_python_join_at_every_parallelism(form: str) -> None:
    query, lo, hi = FORMS[form]
    events = _events(600, seed=len(form))
    want = _model(events, lo, hi)
    assert sum(want.values()) > 50
    python = Job("joins")
    src = python.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    (
        src.filter(lambda e: e["kind"] == "imp")
        .key_by("id")
        .interval_join(src.filter(lambda e: e["kind"] == "click").key_by("id"))
        .between(lo, hi)
        .process(lambda a, b, ctx: ctx.emit({"imp": a["i"], "click": b["i"]}), name="j")
    )
    assert _pairs(testing.run(python, events).by_operator["j"]) == want
    for p in (1, 2, 4):
        got = testing.run(_job(query), events, parallelism=p)
        assert _pairs(got.by_operator["j"]) == want, p
        assert not got.late and not got.dead
        row = got.by_operator["j"][0]
        assert set(row) == {"op", "key", "imp", "click", "clicked_at"} and row["op"] == "j"


def test_a_two_column_key_and_a_filter_pushed_to_one_side() -> None:
    query = (
        SELECT + "ON i.id = c.id AND i.shop = c.shop AND c.ts BETWEEN i.ts AND "
        "i.ts + INTERVAL '1' SECOND WHERE i.i > 100"
    )
    events = _events(500, seed=7)
    want = _model(events, 0, 1_000, ("id", "shop"), lambda e: e["i"] > 100)
    rows = testing.run(_job(query), events, parallelism=2).by_operator["j"]
    assert _pairs(rows) == want and sum(want.values()) > 20
    assert all("|" in r["key"] for r in rows)  # the composite key id|shop


REFUSED = {
    "cross join": (
        SELECT.replace(" JOIN", " CROSS JOIN")
        + "ON i.id = c.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '1' SECOND",
        SqlUnsupported,
        "CROSS JOIN: weir's SQL runs INNER, LEFT, RIGHT and FULL",
    ),
    "regular join without a ttl": (
        SELECT + "ON i.id = c.id",
        SqlUnsupported,
        r"joins without a time bound \(a regular join\), whose rows would be kept forever",
    ),
    "one bound": (SELECT + "ON i.id = c.id AND c.ts >= i.ts", SqlUnsupported, "give both"),
    "no key": (
        SELECT + "ON c.ts BETWEEN i.ts AND i.ts + INTERVAL '1' SECOND",
        SqlUnsupported,
        "ON equality of a key",
    ),
    "not the time attribute": (
        SELECT + "ON i.id = c.id AND c.i BETWEEN i.i AND i.i + INTERVAL '1' SECOND",
        SqlError,
        "not its table's time attribute",
    ),
    "unqualified": (
        "SELECT i FROM imps AS i JOIN clicks AS c ON i.id = c.id AND c.ts BETWEEN "
        "i.ts AND i.ts + INTERVAL '1' SECOND",
        SqlError,
        "qualify it with its table",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(case: str) -> None:
    query, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        _job(query)


def test_a_sql_job_file_joins_its_table_with_itself(tmp_path: Path) -> None:
    path = tmp_path / "self.sql"
    path.write_text(
        "SET 'pipeline.name' = 'joins';\n"
        "CREATE TABLE ev (id STRING, shop STRING, i INT, kind STRING, ts BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');\n"
        "CREATE VIEW j AS SELECT i.i AS imp, c.i AS click FROM ev AS i JOIN ev AS c "
        "ON i.id = c.id AND c.ts BETWEEN i.ts - INTERVAL '100' MILLISECOND AND i.ts + "
        "INTERVAL '300' MILLISECOND WHERE i.kind = 'imp' AND c.kind = 'click';"
    )
    events = _events(400, seed=3)
    got = testing.run(load_script(path), events, parallelism=2).by_operator["j"]
    assert _pairs(got) == _model(events, -100, 300)
    assert "IntervalJoinFunction" in str(describe(load_script(path)))


def test_a_regular_join_with_a_ttl_pairs_every_row_of_a_key() -> None:
    """Flink's regular inner join (``JoinITCase.testInnerJoin`` shape) kept by its state TTL:
    every left row of a key meets every right row, whatever their times."""
    events = _events(300, seed=5)
    job = _job(SELECT + "ON i.id = c.id AND i.shop = c.shop", state_ttl_ms=3_600_000)
    for p in (1, 2):
        rows = testing.run(job, events, parallelism=p).by_operator["j"]
        assert _pairs(rows) == _model(events, -(10**9), 10**9, ("id", "shop")), p
    assert "RegularJoin" in str(describe(job))


def test_a_regular_joins_rows_expire_after_the_ttl() -> None:
    """A side not written for the TTL (processing time) is forgotten: a later record of the
    other side meets nothing of it (Flink's state TTL, ``OnCreateAndWrite``)."""
    job = _job(SELECT + "ON i.id = c.id", state_ttl_ms=150)
    imp = {"id": "a", "shop": "x", "kind": "imp", "ts": 1, "i": 1}
    with Harness(job) as h:
        h.feed([imp, {**imp, "kind": "click", "i": 2, "ts": 2}])
        deadline = time.monotonic() + 0.25
        while time.monotonic() < deadline:  # the TTL is wall-clock time by definition
            h.feed([{**imp, "id": "b", "i": 0}])  # another key keeps the job busy
            time.sleep(0.02)
        h.feed([{**imp, "kind": "click", "i": 3, "ts": 3}, {**imp, "i": 4, "ts": 4}])
        rows = h.finish().by_operator["j"]
    assert sorted((r["imp"], r["click"]) for r in rows) == [(1, 2), (4, 3)]
