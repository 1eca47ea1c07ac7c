"""LEFT, RIGHT and FULL OUTER interval joins in SQL (issue 43): Flink's ``IntervalJoinITCase``
row-time cases ported by name (the inner one for its NULL keys), each outer form against a
brute-force model (the inner pairs, plus every on-time row of an outer side that joined
nothing, padded with NULLs) at parallelism 1, 2 and 4, its joined rows against the job API's
interval join, and the refusals."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources, testing
from weir.base.errors import JobDefinitionError
from weir.engine.explain import describe
from weir.engine.spark.plan import backfill_operators
from weir.engine.sql import SqlUnsupported


def _job(query: str, *, bound_ms: int = 1_000, time: str = "ts") -> Job:
    job = Job("outer")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp=time,
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=bound_ms),
    )
    t1 = events.filter(lambda e: e["t"] == 1)
    t2 = events.filter(lambda e: e["t"] == 2)
    job.sql("j", query, tables={"T1": t1, "T2": t2})
    return job


# Flink's data of the outer cases: (table, key, id, rowtime); Flink's Row3WatermarkExtractor2
# puts each input's watermark at ts - 1, which a single split in time order with bound 0 does
FLINK_T1 = [
    ("A", "L-1", 1000), ("A", "L-2", 2000), ("B", "L-4", 4000), ("B", "L-5", 5000),
    ("A", "L-6", 6000), ("C", "L-7", 7000), ("A", "L-10", 10000), ("A", "L-12", 12000),
    ("A", "L-20", 20000),
]  # fmt: skip
NEGATIVE_T1 = [("A", "L-1", 1000), ("B", "L-4", 4000), ("C", "L-7", 7000)]
NEGATIVE_T2 = [("A", "R-6", 6000), ("B", "R-7", 7000), ("D", "R-8", 8000)]


def _flink_rows(t1: list[tuple[Any, str, int]], t2: list[tuple[Any, str, int]]) -> list[Any]:
    rows = [{"t": 1, "k": k, "id": i, "rowtime": ts} for k, i, ts in t1]
    rows += [{"t": 2, "k": k, "id": i, "rowtime": ts} for k, i, ts in t2]
    return sorted(rows, key=lambda r: (r["rowtime"], r["t"]))


def _flink_run(query: str, t1: Any, t2: Any) -> list[str]:
    job = _job(query, bound_ms=0, time="rowtime")
    got = testing.run(job, _flink_rows(t1, t2))
    assert not got.side.get("j", {}).get("late") and not got.dead
    return sorted(
        ",".join("null" if r[c] is None else str(r[c]) for c in ("a", "b", "c"))
        for r in got.by_operator["j"]
    )


def test_row_time_inner_join() -> None:
    """``testRowTimeInnerJoin``: the NULL keys (LEFT8, RIGHT10) join nothing."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime - INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '6' SECOND"
    )
    t1 = [("A", "LEFT0.999", 999), ("A", "LEFT1", 1000), ("A", "LEFT2", 2000),
          ("A", "LEFT3", 3000), ("B", "LEFT4", 4000), ("A", "LEFT5", 5000),
          ("A", "LEFT6", 6000), (None, "LEFT8", 8000)]  # fmt: skip
    t2 = [("A", "RIGHT6", 6000), ("B", "RIGHT7", 7000), (None, "RIGHT10", 10000)]
    assert _flink_run(query, t1, t2) == sorted(
        ["A,RIGHT6,LEFT1", "A,RIGHT6,LEFT2", "A,RIGHT6,LEFT3", "A,RIGHT6,LEFT5",
         "A,RIGHT6,LEFT6", "B,RIGHT7,LEFT4"]
    )  # fmt: skip


def test_a_null_key_is_padded_not_joined() -> None:
    query = (
        "SELECT t1.id AS a, t2.id AS b, t1.k AS c FROM T1 AS t1 FULL JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t2.rowtime BETWEEN t1.rowtime AND t1.rowtime + INTERVAL '1' SECOND"
    )
    got = _flink_run(query, [(None, "L", 100)], [(None, "R", 200)])
    assert got == ["L,null,null", "null,R,null"]


def test_row_time_left_outer_join() -> None:
    """``testRowTimeLeftOuterJoin``: ``t1.id <> 'L-5'`` on the kept side pads L-5."""
    query = (
        "SELECT t1.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 LEFT OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime - INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '6' SECOND AND t1.id <> 'L-5'"
    )
    t2 = [("A", "R-6", 6000), ("B", "R-7", 7000), ("D", "R-8", 8000), ("A", "R-11", 11000)]
    assert _flink_run(query, FLINK_T1, t2) == sorted(
        ["A,R-6,L-1", "A,R-6,L-2", "A,R-6,L-6", "A,R-6,L-10", "A,R-6,L-12", "B,R-7,L-4",
         "A,R-11,L-6", "A,R-11,L-10", "A,R-11,L-12", "B,null,L-5", "C,null,L-7", "A,null,L-20"]
    )  # fmt: skip


def test_row_time_left_outer_join_negative_interval_size() -> None:
    """``testRowTimeLeftOuterJoinNegativeIntervalSize``: bounds that admit no pair pad every
    left row."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 LEFT OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime + INTERVAL '3' SECOND AND "
        "t2.rowtime + INTERVAL '1' SECOND"
    )
    got = _flink_run(query, NEGATIVE_T1, NEGATIVE_T2)
    assert got == ["null,null,L-1", "null,null,L-4", "null,null,L-7"]


def test_row_time_right_outer_join() -> None:
    """``testRowTimeRightOuterJoin``: ``t2.id <> 'R-5'`` on the kept side pads R-5."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 RIGHT OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime - INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '6' SECOND AND t2.id <> 'R-5'"
    )
    t1 = [r for r in FLINK_T1 if r[1] not in ("L-5", "L-20")]
    t2 = [("A", "R-5", 5000), ("A", "R-6", 6000), ("B", "R-7", 7000), ("D", "R-8", 8000),
          ("A", "R-20", 20000)]  # fmt: skip
    assert _flink_run(query, t1, t2) == sorted(
        ["A,R-5,null", "A,R-6,L-1", "A,R-6,L-2", "A,R-6,L-6", "A,R-6,L-10", "A,R-6,L-12",
         "A,R-20,null", "B,R-7,L-4", "D,R-8,null"]
    )  # fmt: skip


def test_row_time_right_outer_join_negative_interval_size() -> None:
    """``testRowTimeRightOuterJoinNegativeIntervalSize``."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 RIGHT OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime + INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '1' SECOND"
    )
    got = _flink_run(query, NEGATIVE_T1, NEGATIVE_T2)
    assert got == ["A,R-6,null", "B,R-7,null", "D,R-8,null"]


def test_row_time_full_outer_join() -> None:
    """``testRowTimeFullOuterJoin``: a residual condition over both tables (``NOT (t1.id =
    'L-5' OR t2.id = 'R-5')``) pads the rows whose every candidate fails it."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 FULL OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime - INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '6' SECOND AND NOT (t1.id = 'L-5' OR t2.id = 'R-5')"
    )
    t2 = [("A", "R-5", 5000), ("A", "R-6", 6000), ("B", "R-7", 7000), ("D", "R-8", 8000)]
    assert _flink_run(query, FLINK_T1, t2) == sorted(
        ["A,R-6,L-1", "A,R-6,L-2", "A,R-6,L-6", "A,R-6,L-10", "A,R-6,L-12", "B,R-7,L-4",
         "A,R-5,null", "D,R-8,null", "null,null,L-5", "null,null,L-7", "null,null,L-20"]
    )  # fmt: skip


def test_row_time_full_outer_join_negative_interval_size() -> None:
    """``testRowTimeFullOuterJoinNegativeIntervalSize``."""
    query = (
        "SELECT t2.k AS a, t2.id AS b, t1.id AS c FROM T1 AS t1 FULL OUTER JOIN T2 AS t2 ON "
        "t1.k = t2.k AND t1.rowtime BETWEEN t2.rowtime + INTERVAL '5' SECOND AND "
        "t2.rowtime + INTERVAL '4' SECOND"
    )
    got = _flink_run(query, NEGATIVE_T1, NEGATIVE_T2)
    assert got == sorted(
        ["null,null,L-1", "null,null,L-4", "null,null,L-7", "A,R-6,null", "B,R-7,null",
         "D,R-8,null"]
    )  # fmt: skip


def _events(n: int, seed: int) -> list[dict[str, Any]]:
    """Out of order within 400 ms (the watermark's bound is 1 s): nothing is late."""
    rng = random.Random(seed)
    out, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 60)
        out.append(
            {"id": rng.choice("abcd"), "i": i, "t": rng.choice([1, 1, 2]),
             "ts": clock - rng.randint(0, 400)}
        )  # fmt: skip
    return out


def _model(events: list[dict[str, Any]], kind: str, lo: int, hi: int) -> Counter[Any]:
    """Every pair of one key within the bounds, plus the unjoined rows of the outer sides."""
    lefts = [e for e in events if e["t"] == 1]
    rights = [e for e in events if e["t"] == 2]
    pairs = [
        (a["i"], b["i"]) for a in lefts for b in rights
        if a["id"] == b["id"] and lo <= b["ts"] - a["ts"] <= hi
    ]  # fmt: skip
    out = Counter(pairs)
    if kind in ("LEFT", "FULL"):
        joined = {a for a, _ in pairs}
        out.update((a["i"], None) for a in lefts if a["i"] not in joined)
    if kind in ("RIGHT", "FULL"):
        joined = {b for _, b in pairs}
        out.update((None, b["i"]) for b in rights if b["i"] not in joined)
    return out


def _query(kind: str) -> str:
    return (
        f"SELECT l.i AS l, r.i AS r FROM T1 AS l {kind} OUTER JOIN T2 AS r ON l.id = r.id "
        "AND r.ts BETWEEN l.ts - INTERVAL '100' MILLISECOND AND l.ts + INTERVAL '300' MILLISECOND"
    )


@pytest.mark.parametrize("kind", ["LEFT", "RIGHT", "FULL"])
def test_each_outer_form_equals_the_model_at_every_parallelism(kind: str) -> None:
    events = _events(700, seed=len(kind))
    want = _model(events, kind, -100, 300)
    padded = sum(n for (a, b), n in want.items() if a is None or b is None)
    assert padded > 5 and sum(want.values()) - padded > 50  # both kinds of rows occur
    for p in (1, 2, 4):
        got = testing.run(_job(_query(kind)), events, parallelism=p)
        assert Counter((r["l"], r["r"]) for r in got.by_operator["j"]) == want, p
        assert not got.side.get("j", {}).get("late") and not got.dead


def test_the_joined_rows_equal_the_job_apis_interval_join() -> None:
    events = _events(500, seed=9)
    python = Job("outer")
    src = python.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    (
        src.filter(lambda e: e["t"] == 1)
        .key_by("id")
        .interval_join(src.filter(lambda e: e["t"] == 2).key_by("id"))
        .between(-100, 300)
        .process(lambda a, b, ctx: ctx.emit({"l": a["i"], "r": b["i"]}), name="j")
    )
    inner = Counter((r["l"], r["r"]) for r in testing.run(python, events).by_operator["j"])
    rows = testing.run(_job(_query("FULL")), events, parallelism=2).by_operator["j"]
    joined = Counter((r["l"], r["r"]) for r in rows if None not in (r["l"], r["r"]))
    assert joined == inner and sum(inner.values()) > 50


def test_a_late_row_goes_to_the_late_output_and_is_never_padded() -> None:
    rows = [
        {"id": "a", "i": 1, "t": 1, "ts": 5_000},
        {"id": "a", "i": 2, "t": 1, "ts": 1_000},  # behind the watermark 3 999: late
    ]
    got = testing.run(_job(_query("LEFT")), rows)
    assert [(r["l"], r["r"]) for r in got.by_operator["j"]] == [(1, None)]
    assert [x["record"]["i"] for x in got.side["j"]["late"]] == [2]


def test_explain_names_the_outer_join() -> None:
    text = str(describe(_job(_query("LEFT"))))
    assert "LEFT OUTER interval join, right.ts - left.ts in [-100, 300] ms" in text


REFUSED = {
    "where on the padded side": (
        _query("LEFT") + " WHERE r.i > 3",
        "filters the side padded with NULLs",
    ),
    "where on either side of a full join": (
        _query("FULL") + " WHERE l.i > 3",
        "filters the side padded with NULLs",
    ),
    "an outer regular join": (
        "SELECT l.i AS l FROM T1 AS l LEFT JOIN T2 AS r ON l.id = r.id",
        "LEFT OUTER join without a time bound",
    ),
    "a cross join": (
        "SELECT l.i AS l FROM T1 AS l CROSS JOIN T2 AS r",
        "CROSS JOIN: weir's SQL runs INNER, LEFT, RIGHT and FULL",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(case: str) -> None:
    query, message = REFUSED[case]
    with pytest.raises(SqlUnsupported, match=message):
        _job(query)


def test_the_backfill_refuses_an_outer_join_by_name() -> None:
    job = _job(_query("RIGHT"))
    for op in ("j", None):
        with pytest.raises(JobDefinitionError, match="'j' of job 'outer' is a SQL outer interval"):
            backfill_operators(job, op)
