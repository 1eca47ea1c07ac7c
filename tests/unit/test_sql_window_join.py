"""Window joins in SQL (issue 43, item 2): both sides one window TVF, joined on the windows'
bounds and keys, INNER and LEFT/RIGHT/FULL OUTER, emitted once when each window fires.

Each form against a brute-force model (every pair of one key in one window of the TVF; for an
outer join each row of a window whose other side has no row of the key, NULL-padded) at
parallelism 1, 2 and 4, the inner form also against the job API's window join; batching
invariance (Hypothesis); the refusals by name. Ported in shape from Flink's
``WindowJoinITCase`` (``testInnerJoinOnWTF``, ``…WithOffset``, ``…WithNegativeOffset``,
``testLeftJoinOnWTF``, ``testRightJoinOnWTF``, ``testOuterJoinOnWTF``, and the HOP and CUMULATE
variants), on Flink's ``windowDataWithTimestamp`` rows for the left side; Flink's right-side
data is not at hand, so the expected rows come from the model, not from Flink's files.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir import Job, WatermarkStrategy, sources, testing, windows
from weir.engine.explain import describe
from weir.engine.sql import SqlError, SqlUnsupported, load_script
from weir.engine.sql.windowed import window_views
from weir.testing import Harness

TVFS = {
    "tumble": ("TUMBLE({t}, INTERVAL '5' SECOND)", windows.tumbling(ms=5_000)),
    "tumble_offset": (
        "TUMBLE({t}, INTERVAL '5' SECOND, INTERVAL '1' SECOND)",
        windows.tumbling(ms=5_000, offset_ms=1_000),
    ),
    "tumble_negative_offset": (
        "TUMBLE({t}, INTERVAL '5' SECOND, INTERVAL '-1' SECOND)",
        windows.tumbling(ms=5_000, offset_ms=-1_000),
    ),
    "hop": ("HOP({t}, INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
            windows.sliding(size_ms=6_000, slide_ms=2_000)),
    "cumulate": ("CUMULATE({t}, INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
                 windows.cumulate(size_ms=6_000, step_ms=2_000)),
}  # fmt: skip


def _tvf(form: str, table: str) -> str:
    return "TABLE(" + TVFS[form][0].format(t=f"TABLE {table}, DESCRIPTOR(ts)") + ")"


def _query(form: str = "tumble", kind: str = "JOIN", on: str = "AND L.name = R.name") -> str:
    return (
        "SELECT L.name, COALESCE(L.window_start, R.window_start) AS ws, "
        "COALESCE(L.window_end, R.window_end) AS we, L.i AS li, R.i AS ri "
        f"FROM (SELECT * FROM {_tvf(form, 't1')}) L {kind} "
        f"(SELECT * FROM {_tvf(form, 't2')}) R "
        f"ON L.window_start = R.window_start AND L.window_end = R.window_end {on}"
    )


def _job(query: str, name: str = "j") -> Job:
    job = Job("wjoin")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    t1 = events.filter(lambda e: e["side"] == 1)
    t2 = events.filter(lambda e: e["side"] == 2)
    job.sql(name, query, tables={"t1": t1, "t2": t2})
    return job


# Flink's TestData.windowDataWithTimestamp (2020-10-10 00:00:SS as SS seconds): (ts, int,
# string, name); the row at 4 s after 8 s is Flink's "late event" (with a 1 s bound, late here
# too); the right side is rows of our own
FLINK_T1 = [
    (1, 1, "Hi", "a"), (2, 2, "Comment#1", "a"), (3, 2, "Comment#1", "a"), (4, 5, None, "a"),
    (7, 3, "Hello", "b"), (6, 6, "Hi", "b"), (8, 3, "Comment#2", "a"), (4, 5, "Hi", "a"),
    (16, 4, "Hi", "b"), (32, 7, None, None), (34, 1, "Comment#3", "b"),
]  # fmt: skip
T2 = [
    (5, 3, "Hello", "b"), (6, 6, "Hi", "b"), (9, 1, "Hi", "c"), (17, 4, "Hi", "b"),
    (18, 1, "Hi", "a"), (33, 1, "Comment#3", "b"), (34, 2, None, None),
]  # fmt: skip


def _flink_events() -> list[dict[str, Any]]:
    """T1 in Flink's order, each T2 row after the T1 rows that reached its time before it."""
    rows, latest = [], 0
    for r in FLINK_T1:
        latest = max(latest, r[0])
        rows.append((latest, 1, r))
    rows += [(r[0], 2, r) for r in T2]
    rows.sort(key=lambda x: (x[0], x[1]))
    out = []
    for i, (_, side, (sec, n, s, name)) in enumerate(rows):
        out.append({"side": side, "i": i, "ts": sec * 1_000, "int": n, "string": s, "name": name})
    return out


def _random_events(n: int, seed: int) -> list[dict[str, Any]]:
    """Out of order within 600 ms (the watermark's bound is 1 s): nothing is late."""
    rng = random.Random(seed)
    out, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 120)
        name = rng.choice(["a", "b", "c", "d", None])
        out.append({"side": rng.choice((1, 2)), "i": i, "ts": clock - rng.randint(0, 600),
                    "name": name})  # fmt: skip
    return out


def _model(events: list[dict[str, Any]], form: str, kind: str) -> Counter[tuple[Any, ...]]:
    """Every (name, ws, we, li, ri) row of the join: SQL's equality never matches NULL keys."""
    assigner = TVFS[form][1]
    cells: dict[tuple[Any, int, int], tuple[list[int], list[int]]] = {}
    for e in events:
        found = assigner.assign(e["ts"])
        for w in found if isinstance(found, list) else [found]:
            cell = cells.setdefault((e["name"], w.start, w.end), ([], []))
            cell[e["side"] - 1].append(e["i"])
    out: Counter[tuple[Any, ...]] = Counter()
    for (name, ws, we), (lefts, rights) in cells.items():
        if lefts and rights and name is not None:
            out.update((name, ws, we, li, ri) for li in lefts for ri in rights)
            continue  # a NULL key (below) equals nothing: its rows stay unmatched
        if kind in ("LEFT JOIN", "FULL OUTER JOIN"):
            out.update((name, ws, we, li, None) for li in lefts)
        if kind in ("RIGHT JOIN", "FULL OUTER JOIN"):
            out.update((None, ws, we, None, ri) for ri in rights)
    return out


def _rows(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter((r["name"], r["ws"], r["we"], r["li"], r["ri"]) for r in rows)


KINDS = ("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN")


@pytest.mark.parametrize(
    ("flink_case", "form"),
    [("testInnerJoinOnWTF", "tumble"), ("testInnerJoinOnWTFWithOffset", "tumble_offset"),
     ("testInnerJoinOnWTFWithNegativeOffset", "tumble_negative_offset")],
)  # fmt: skip
def test_flink_rows_inner_join_equals_the_model_and_the_python_join(
    flink_case: str, form: str
) -> None:
    events = _flink_events()
    assigner = TVFS[form][1]
    late = [  # Flink's late row, when its window has fired under the watermark 8 s - 1 s - 1
        e["i"] for e in events
        if (e["ts"], e["string"]) == (4_000, "Hi") and assigner.assign(4_000).end - 1 <= 6_999
    ]  # fmt: skip
    want = _model([e for e in events if e["i"] not in late], form, "JOIN")
    assert want, flink_case
    python = Job("wjoin")
    src = python.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    (
        src.filter(lambda e: e["side"] == 1 and e["name"] is not None)
        .join(src.filter(lambda e: e["side"] == 2 and e["name"] is not None))
        .where("name").equal_to("name")
        .window(assigner)
        .apply(lambda a, b: {"name": a["name"], "ws": assigner.assign(a["ts"]).start,
                             "we": assigner.assign(a["ts"]).end, "li": a["i"], "ri": b["i"]},
               name="j")
    )  # fmt: skip
    for p in (1, 2):
        assert _rows(testing.run(python, events, parallelism=p).by_operator["j"]) == want, p
    for p in (1, 2, 4):
        got = testing.run(_job(_query(form)), events, parallelism=p)
        assert _rows(got.by_operator["j"]) == want, (flink_case, p)
        got_late = got.side.get("j", {}).get("late", [])
        assert [r["record"]["i"] for r in got_late] == late and not got.dead


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("form", ["tumble", "hop", "cumulate"])
def test_each_kind_and_window_equals_the_model_at_every_parallelism(form: str, kind: str) -> None:
    """``testInnerJoin…``/``testLeftJoin…``/``testRightJoin…``/``testOuterJoin…`` in shape,
    over TUMBLE, HOP and CUMULATE (Flink's ``…WithHop``/``…WithCumulate`` variants)."""
    events = _random_events(500, seed=len(form) * 7 + len(kind))
    want = _model(events, form, kind)
    assert sum(want.values()) > 100
    for p in (1, 2, 4):
        got = testing.run(_job(_query(form, kind)), events, parallelism=p)
        assert _rows(got.by_operator["j"]) == want, (form, kind, p)
        assert not got.side.get("j") and not got.dead
        row = got.by_operator["j"][0]
        assert list(row) == ["op", "key", "name", "ws", "we", "li", "ri"] and row["op"] == "j"


def test_an_outer_join_pads_the_missing_side_with_nulls_window_columns_too() -> None:
    events = [
        {"side": 1, "i": 0, "ts": 100, "name": "a"},
        {"side": 2, "i": 1, "ts": 200, "name": "b"},
        {"side": 1, "i": 2, "ts": 9_000, "name": "a"},
    ]
    query = (
        "SELECT L.name AS ln, R.name AS rn, L.window_start AS lws, R.window_start AS rws, "
        f"R.window_time AS rwt FROM {_tvf('tumble', 't1')} AS L FULL JOIN "
        f"{_tvf('tumble', 't2')} AS R ON L.window_start = R.window_start AND "
        "L.window_end = R.window_end AND L.name = R.name"
    )
    rows = testing.run(_job(query), events).by_operator["j"]
    assert sorted(rows, key=lambda r: (r["key"], r["lws"] or 0)) == [
        {"op": "j", "key": "a", "ln": "a", "rn": None, "lws": 0, "rws": None, "rwt": None},
        {"op": "j", "key": "a", "ln": "a", "rn": None, "lws": 5_000, "rws": None, "rwt": None},
        {"op": "j", "key": "b", "ln": None, "rn": "b", "lws": None, "rws": 0, "rwt": 4_999},
    ]


def test_a_join_without_keys_pairs_the_whole_window_and_filters_each_side() -> None:
    events = _random_events(200, seed=11)
    query = (
        "SELECT L.i AS li, R.i AS ri FROM "
        f"(SELECT * FROM {_tvf('tumble', 't1')} WHERE name = 'a') L JOIN "
        f"(SELECT * FROM {_tvf('tumble', 't2')} WHERE name <> 'a') R "
        "ON L.window_end = R.window_end AND L.window_start = R.window_start"
    )
    rows = testing.run(_job(query), events, parallelism=2).by_operator["j"]
    want = Counter(
        (a["i"], b["i"])
        for a in events
        for b in events
        if a["side"] == 1 and a["name"] == "a" and b["side"] == 2
        and b["name"] not in ("a", None) and a["ts"] // 5_000 == b["ts"] // 5_000
    )  # fmt: skip
    assert Counter((r["li"], r["ri"]) for r in rows) == want and sum(want.values()) > 10
    assert {r["key"] for r in rows} == {"*"}


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(
        st.fixed_dictionaries({
            "side": st.sampled_from([1, 2]), "ts": st.integers(0, 12_000),
            "name": st.sampled_from(["a", "b", None]),
        }),
        max_size=30,
    ),
    cuts=st.lists(st.integers(1, 30), max_size=5),
    kind=st.sampled_from(KINDS),
)  # fmt: skip
def test_batching_never_changes_the_joined_rows(
    events: list[dict[str, Any]], cuts: list[int], kind: str
) -> None:
    events = [{**e, "i": i} for i, e in enumerate(events)]
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    whole = testing.run(_job(_query("hop", kind)), events).by_operator.get("j", [])
    with Harness(_job(_query("hop", kind)), parallelism=2) as h:
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            h.feed(events[lo:hi])
            h.flush()
        rows = h.finish().by_operator.get("j", [])
    assert _rows(rows) == _rows(whole)


AGG_JOIN = (
    "SELECT L.name, L.window_start AS ws, L.window_end AS we, uv1, R.uv2, R.n "
    "FROM (SELECT name, window_start, window_end, COUNT(DISTINCT s) AS uv1 FROM "
    f"{_tvf('tumble', 't1')} GROUP BY name, window_start, window_end) L {{kind}} "
    "(SELECT name, window_start, window_end, COUNT(DISTINCT s) AS uv2, COUNT(*) AS n FROM "
    f"{_tvf('tumble', 't2')} WHERE i > 2 GROUP BY name, window_start, window_end) R "
    "ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.name = R.name"
)


def _aggregate_model(events: list[dict[str, Any]], kind: str) -> Counter[tuple[Any, ...]]:
    """AGG_JOIN by brute force: each side's groups per window (uv: distinct non-NULL s; n:
    rows), joined on name (a NULL name joins nothing)."""
    sides: tuple[dict[Any, dict[str, Any]], ...] = ({}, {})
    for e in events:
        if e["side"] == 2 and e["i"] <= 2:
            continue
        w = TVFS["tumble"][1].assign(e["ts"])
        group = sides[e["side"] - 1].setdefault((e["name"], w.start, w.end), {"s": set(), "n": 0})
        group["n"] += 1
        if e["s"] is not None:
            group["s"].add(e["s"])
    out: Counter[tuple[Any, ...]] = Counter()
    for (name, ws, we), g in sides[0].items():
        r = sides[1].get((name, ws, we)) if name is not None else None
        if r is not None:
            out[(name, ws, we, len(g["s"]), len(r["s"]), r["n"])] += 1
        elif kind in ("LEFT JOIN", "FULL OUTER JOIN"):
            out[(name, ws, we, len(g["s"]), None, None)] += 1
    if kind in ("RIGHT JOIN", "FULL OUTER JOIN"):
        for (name, ws, we), r in sides[1].items():
            if name is None or (name, ws, we) not in sides[0]:
                out[(None, None, None, None, len(r["s"]), r["n"])] += 1
    return out


@pytest.mark.parametrize(
    ("flink_case", "kind"),
    [("testInnerJoin", "JOIN"), ("testLeftJoin", "LEFT JOIN"), ("testRightJoin", "RIGHT JOIN"),
     ("testOuterJoin", "FULL OUTER JOIN")],
)  # fmt: skip
def test_a_join_of_two_window_aggregates_equals_the_model(flink_case: str, kind: str) -> None:
    """Flink's ``WindowJoinITCase`` main cases join two window aggregates (``COUNT(DISTINCT
    string)`` per name and window); each side's aggregate and the join are one function."""
    rng = random.Random(len(kind))
    events = [{**e, "s": rng.choice(["Hi", "Hello", "Comment#1", None])}
              for e in _random_events(600, seed=len(flink_case))]  # fmt: skip
    want = _aggregate_model(events, kind)
    assert sum(want.values()) > 20
    for p in (1, 2, 4):
        rows = testing.run(_job(AGG_JOIN.format(kind=kind)), events, parallelism=p)
        got = Counter(
            (r["name"], r["ws"], r["we"], r["uv1"], r["uv2"], r["n"]) for r in rows.by_operator["j"]
        )
        assert got == want, (flink_case, p)


REFUSED = {
    "different windows": (
        _query().replace("(SELECT * FROM TABLE(TUMBLE(TABLE t2, DESCRIPTOR(ts), INTERVAL '5'",
                         "(SELECT * FROM TABLE(TUMBLE(TABLE t2, DESCRIPTOR(ts), INTERVAL '6'"),
        SqlUnsupported, "different windows",
    ),
    "missing window_end": (
        _query().replace("AND L.window_end = R.window_end", ""),
        SqlUnsupported, "without L.window_end = R.window_end",
    ),
    "session": (
        _query().replace(
            "TUMBLE(TABLE t1, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
            "SESSION(TABLE t1 PARTITION BY name, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
        ),
        SqlUnsupported, "no SESSION",
    ),
    "an aggregate joined on a non-group column": (
        AGG_JOIN.format(kind="JOIN").replace("L.name = R.name", "L.uv1 = R.name"),
        SqlUnsupported, "joins on its GROUP BY columns",
    ),
    "where over the join": (
        _query() + " WHERE L.i > 3", SqlUnsupported, "WHERE over a window join",
    ),
    "other on term": (
        _query(on="AND L.i < R.i"), SqlUnsupported, "ON holds the windows' bounds",
    ),
    "a table beside a tvf": (
        _query().replace(f"(SELECT * FROM {_tvf('tumble', 't2')})", "t2"),
        SqlUnsupported, "sides are both window TVFs",
    ),
    "window_time equality": (
        _query(on="AND L.window_time = R.window_time"), SqlUnsupported, "join window_start",
    ),
    "star": (
        _query().replace("SELECT L.name,", "SELECT *,"), SqlUnsupported, "name the columns",
    ),
    "unqualified": (
        _query(on="AND name = R.name"), SqlError, "qualify it",
    ),
    "reserved name": (
        _query().replace("L.i AS li", "L.i AS key"), SqlError, "reserved",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(case: str) -> None:
    query, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        _job(query)


def test_a_sql_job_file_explains_the_join_and_the_backfill_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "wj.sql"
    path.write_text(
        "SET 'pipeline.name' = 'wjoin';\n"
        "CREATE TABLE ev (side INT, i INT, name STRING, ts BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');\n"
        "CREATE VIEW j AS SELECT L.name, L.window_start AS ws, L.window_end AS we, L.i AS li, "
        f"R.i AS ri FROM (SELECT * FROM {_tvf('tumble', 'ev')} WHERE side = 1) L JOIN "
        f"(SELECT * FROM {_tvf('tumble', 'ev')} WHERE side = 2) R ON L.window_start = "
        "R.window_start AND L.window_end = R.window_end AND L.name = R.name;"
    )
    events = _random_events(300, seed=3)
    job = load_script(path)
    got = testing.run(job, events, parallelism=2).by_operator["j"]
    assert _rows(got) == _model(events, "tumble", "JOIN")
    assert "INNER window join on TUMBLE" in str(describe(job))
    assert window_views(job.operators) == [("j", "window join (JOIN of two window TVFs)")]


def test_the_backfill_refuses_a_window_join_by_name() -> None:
    from weir import JobDefinitionError
    from weir.engine.spark.plan import backfill_operator

    with pytest.raises(JobDefinitionError, match=r"'j' of job 'wjoin' is a window join"):
        backfill_operator(_job(_query()), "j")


def test_a_row_in_a_hops_gap_is_in_no_window_and_not_late() -> None:
    query = (
        _query()
        .replace(
            "TUMBLE(TABLE t1, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
            "HOP(TABLE t1, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '2' SECOND)",
        )
        .replace(
            "TUMBLE(TABLE t2, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
            "HOP(TABLE t2, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '2' SECOND)",
        )
    )
    events = [
        {"side": 1, "i": 0, "ts": 1_000, "name": "a"},
        {"side": 2, "i": 1, "ts": 1_500, "name": "a"},
        {"side": 1, "i": 2, "ts": 3_000, "name": "a"},  # in [0, 2000) and [5000, 7000): none
    ]
    got = testing.run(_job(query), events)
    assert [(r["li"], r["ri"]) for r in got.by_operator["j"]] == [(0, 1)]
    assert not got.side.get("j") and not got.dead
