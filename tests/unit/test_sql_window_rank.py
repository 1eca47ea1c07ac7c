"""Window Top-N and window deduplication in SQL (issue 43, item 3): ``ROW_NUMBER() OVER
(PARTITION BY window_start, window_end [, k] ORDER BY …)`` over a window TVF, ranked per window
and emitted once, final, when the window fires.

Against a brute-force model (each window's rows of a partition, sorted stably: equal rows keep
their arrival order; the keep-last deduplication puts the newest first among equals, Flink's
``current >= previous``) at parallelism 1, 2 and 4, as a SQL job file and as ``job.sql`` over
a Python stream; batching invariance (Hypothesis); the refusals by name. Ported in shape from
Flink's ``WindowRankITCase`` (``testTumbleWindowTVF``, ``testHopWindowTVF``,
``testCumulateWindowTVF``, ``…WithoutRankNumber``) and ``WindowDeduplicateITCase``
(``testTumbleWindowTVFKeepFirstRow`` / ``…KeepLastRow``, the HOP and CUMULATE variants), on
Flink's ``windowDataWithTimestamp`` rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
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

TABLE = """CREATE TABLE t (name STRING, ts BIGINT, n INT, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');
"""
TVFS = {
    "tumble": ("TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)", windows.tumbling(ms=5_000)),
    "hop": ("HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
            windows.sliding(size_ms=10_000, slide_ms=5_000)),
    "cumulate": ("CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
                 windows.cumulate(size_ms=15_000, step_ms=5_000)),
}  # fmt: skip
FORMS = {  # (partition by name?, ORDER BY, N, SELECT of the outer query)
    "top2": (True, [("n", True)], 2, "name, ts, n, window_start, window_end, rn"),
    "top1-global": (False, [("n", False), ("ts", True)], 1, "name, ts, n, window_end, rn"),
    "top3-no-rn": (True, [("n", True)], 3, "name, ts, n, window_end"),
    "keep-first": (True, [("ts", False)], 1, "*"),
    "keep-last": (True, [("ts", True)], 1, "*"),
}


def _view(tvf: str, form: str) -> str:
    by_name, order, n, select = FORMS[form]
    partition = "window_start, window_end" + (", name" if by_name else "")
    order_sql = ", ".join(f"{c} {'DESC' if d else 'ASC'}" for c, d in order)
    limit = "rn = 1" if form.startswith("keep") else f"rn <= {n}"
    return (
        f"SELECT {select} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {partition} "
        f"ORDER BY {order_sql}) AS rn FROM TABLE({TVFS[tvf][0]})) WHERE {limit}"
    )


def _job(tmp_path: Path, view: str) -> Job:
    path = tmp_path / "wrank.sql"
    path.write_text(f"SET 'pipeline.name' = 'wrank';\n{TABLE}CREATE VIEW r AS {view};")
    return load_script(path)


def _sort_key(row: dict[str, Any], order: list[tuple[str, bool]]) -> tuple[Any, ...]:
    """NULL first ascending, last descending."""
    out: list[Any] = []
    for col, desc in order:
        v = row[col]
        out.append(((1,) if desc else (0,)) if v is None else ((0, -v) if desc else (1, v)))
    return tuple(out)


def _model(events: list[dict[str, Any]], tvf: str, form: str) -> list[tuple[Any, ...]]:
    """Every emitted row as (key, window_start, window_end, rn, name, ts, n), sorted; a row
    joins the windows that have not fired under the watermark before it, max(ts) - 1 s."""
    by_name, order, n, _ = FORMS[form]
    assigner = TVFS[tvf][1]
    cells: dict[tuple[Any, int, int], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    top = None
    for i, e in enumerate(events):
        found = assigner.assign(e["ts"])
        wm = None if top is None else top - 1_000
        top = e["ts"] if top is None else max(top, e["ts"])
        for w in found if isinstance(found, list) else [found]:
            if wm is not None and w.end - 1 <= wm:
                continue  # fired: late for this window
            key = e["name"] if by_name else "*"  # the NULL key is None in a result
            cells[(key, w.start, w.end)].append((i, e))
    out = []
    keep_last = form == "keep-last"
    for (key, ws, we), rows in cells.items():
        ranked = sorted(rows, key=lambda r: (_sort_key(r[1], order), -r[0] if keep_last else 0))
        for rn, (_, e) in enumerate(ranked[:n], start=1):
            out.append((key, ws, we, rn, e["name"], e["ts"], e["n"]))
    return sorted(out, key=repr)


def _got(rows: list[dict[str, Any]], tvf: str) -> list[tuple[Any, ...]]:
    """The rows as the model's tuples: the window from window_start or window_end (the other
    from the TVF), the rank from rn or from the order the window's rows were emitted in."""
    assigner = TVFS[tvf][1]
    out, rank = [], defaultdict(int)
    for r in rows:
        assert r["op"] == "r"
        ws = r.get("window_start")
        we = r.get("window_end")
        if ws is None or we is None:
            ws, we = _bounds(assigner, r["ts"], ws, we)
        rank[(r["key"], ws, we)] += 1
        rn = r.get("rn", rank[(r["key"], ws, we)])
        out.append((r["key"], ws, we, rn, r["name"], r["ts"], r["n"]))
    return sorted(out, key=repr)


def _bounds(assigner: Any, ts: int, ws: int | None, we: int | None) -> tuple[int, int]:
    found = assigner.assign(ts)
    for w in found if isinstance(found, list) else [found]:
        if w.start == ws or w.end == we:
            return w.start, w.end
    raise AssertionError((ts, ws, we))


# Flink's TestData.windowDataWithTimestamp (seconds past 2020-10-10 00:00): the row at 4 s after
# 8 s is its "late event", late here too (the watermark is max(ts) - 1 s)
FLINK_ROWS = [
    (1, 1, "Hi", "a"), (2, 2, "Comment#1", "a"), (3, 2, "Comment#1", "a"), (4, 5, None, "a"),
    (7, 3, "Hello", "b"), (6, 6, "Hi", "b"), (8, 3, "Comment#2", "a"), (4, 5, "Hi", "a"),
    (16, 4, "Hi", "b"), (32, 7, None, None), (34, 1, "Comment#3", "b"),
]  # fmt: skip
FLINK = [{"ts": t * 1_000, "n": n, "s": s, "name": name} for t, n, s, name in FLINK_ROWS]


@pytest.mark.parametrize("tvf", sorted(TVFS))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_flink_rows_each_form_and_window_equal_the_model_at_every_parallelism(
    tmp_path: Path, tvf: str, form: str
) -> None:
    want = _model(FLINK, tvf, form)
    assert want
    for p in (1, 2, 4):
        got = testing.run(_job(tmp_path, _view(tvf, form)), FLINK, parallelism=p)
        assert _got(got.by_operator["r"], tvf) == want, (tvf, form, p)
        late = [r["record"]["ts"] for r in got.side.get("r", {}).get("late", [])]
        assert late == ([4_000] if tvf == "tumble" else []) and not got.dead


def _random(n: int, seed: int) -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    out, clock = [], 0
    for _ in range(n):
        clock += rng.randint(0, 300)
        out.append({"name": rng.choice(["a", "b", "c", None]), "ts": clock - rng.randint(0, 900),
                    "n": rng.choice([None, *range(8)]), "s": None})  # fmt: skip
    return out


@pytest.mark.parametrize("form", sorted(FORMS))
def test_random_rows_equal_the_model_as_a_python_job_too(form: str) -> None:
    events = _random(400, seed=len(form))
    want = _model(events, "hop", form)
    job = Job("wrank")
    src = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts",
                     watermarks=WatermarkStrategy.sql_delay(ms=1_000))  # fmt: skip
    job.sql("r", _view("hop", form).replace("TABLE t,", "TABLE e,"), tables={"e": src})
    for p in (1, 2):
        got = testing.run(job, events, parallelism=p)
        assert _got(got.by_operator["r"], "hop") == want, p
        assert not got.side.get("r") and not got.dead


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(
        st.fixed_dictionaries({
            "name": st.sampled_from(["a", "b", None]), "ts": st.integers(0, 20_000),
            "n": st.one_of(st.none(), st.integers(0, 3)), "s": st.none(),
        }),
        max_size=30,
    ),
    cuts=st.lists(st.integers(1, 30), max_size=5),
    form=st.sampled_from(sorted(FORMS)),
)  # fmt: skip
def test_batching_never_changes_the_rankings(
    tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, Any]], cuts: list[int],
    form: str,
) -> None:  # fmt: skip
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    job = _job(tmp_path_factory.mktemp("wrank"), _view("cumulate", form))
    whole = testing.run(job, events).by_operator.get("r", [])
    with Harness(job, parallelism=2) as h:
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            h.feed(events[lo:hi])
            h.flush()
        rows = h.finish().by_operator.get("r", [])
    assert _got(rows, "cumulate") == _got(whole, "cumulate")


AGG_TOP2 = (
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
    "ORDER BY total DESC) AS rn FROM (SELECT window_start, window_end, name, SUM(n) AS total, "
    "COUNT(*) AS c FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
    "INTERVAL '10' SECOND)) WHERE s IS NULL OR s <> 'x' "
    "GROUP BY window_start, window_end, name)) WHERE rn <= 2"
)


def _aggregate_model(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """AGG_TOP2 by brute force: per on-time window the groups' SUM(n) (NULL when every n is)
    and COUNT(*), the two of largest sum (NULL last; ties: the group seen first)."""
    assigner = TVFS["hop"][1]
    cells: dict[tuple[int, int], dict[Any, list[Any]]] = defaultdict(dict)
    top = None
    for e in events:
        wm = None if top is None else top - 1_000
        top = e["ts"] if top is None else max(top, e["ts"])
        if e["s"] == "x":
            continue
        for w in assigner.assign(e["ts"]):
            if wm is not None and w.end - 1 <= wm:
                continue
            group = cells[(w.start, w.end)].setdefault(e["name"], [None, 0])
            if e["n"] is not None:
                group[0] = e["n"] if group[0] is None else group[0] + e["n"]
            group[1] += 1
    out = []
    for (ws, we), groups in cells.items():
        ranked = sorted(groups.items(), key=lambda g: _sort_key({"t": g[1][0]}, [("t", True)]))
        for rn, (name, (total, c)) in enumerate(ranked[:2], start=1):
            out.append(("*", ws, we, rn, name, total, c))
    return sorted(out, key=repr)


def _aggregate_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        ((r["key"], r["window_start"], r["window_end"], r["rn"], r["name"], r["total"], r["c"])
         for r in rows),
        key=repr,
    )  # fmt: skip


def test_flinks_window_top_n_of_a_window_aggregate_example() -> None:
    """The example of Flink's window Top-N docs (``WindowRankITCase.testTop2…`` shape): the 3
    suppliers of the largest total price per 10 minutes."""
    job = Job("bids")
    bids = job.source(sources.jsonl("/unused.jsonl"), timestamp="bidtime",
                      watermarks=WatermarkStrategy.sql_delay(ms=1_000))  # fmt: skip
    job.sql(
        "top3",
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
        "ORDER BY price DESC) AS rownum FROM (SELECT window_start, window_end, supplier_id, "
        "SUM(price) AS price, COUNT(*) AS cnt FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), "
        "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, supplier_id)) "
        "WHERE rownum <= 3",
        tables={"Bid": bids},
    )
    m = 60_000
    bid = [("supplier1", 8, 4.0), ("supplier2", 8, 2.0), ("supplier1", 9, 5.0),
           ("supplier2", 9, 3.0), ("supplier3", 11, 1.0), ("supplier4", 11, 6.0),
           ("supplier1", 12, 3.0), ("supplier3", 13, 2.0), ("supplier4", 14, 1.0)]  # fmt: skip
    events = [{"supplier_id": s, "bidtime": t * m, "price": p} for s, t, p in bid]
    for p in (1, 2):
        rows = testing.run(job, events, parallelism=p).by_operator["top3"]
        got = [(r["window_start"] // m, r["supplier_id"], r["price"], r["cnt"], r["rownum"])
               for r in rows]  # fmt: skip
        assert got == [
            (0, "supplier1", 9.0, 2, 1), (0, "supplier2", 5.0, 2, 2),
            (10, "supplier4", 7.0, 2, 1), (10, "supplier3", 3.0, 2, 2),
            (10, "supplier1", 3.0, 1, 3),
        ], p  # fmt: skip


def test_a_window_aggregates_ranking_equals_the_model_at_every_parallelism(
    tmp_path: Path,
) -> None:
    events = [{**e, "s": "x" if i % 7 == 0 else None} for i, e in enumerate(_random(500, 3))]
    want = _aggregate_model(events)
    assert len(want) > 20
    for p in (1, 2, 4):
        got = testing.run(_job(tmp_path, AGG_TOP2), events, parallelism=p)
        assert _aggregate_rows(got.by_operator["r"]) == want, p
    assert "ordered by total DESC of the window aggregate grouped by name" in str(
        describe(_job(tmp_path, AGG_TOP2))
    )


def test_a_window_aggregates_ranking_partitioned_by_a_group_column(tmp_path: Path) -> None:
    """PARTITION BY window_start, window_end, name over a GROUP BY name, s: each name's best
    s of each window, keyed by name."""
    view = (
        "SELECT name, s, c, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, "
        "window_end, name ORDER BY c DESC) AS rn FROM (SELECT window_start, window_end, name, "
        "s, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)) "
        "GROUP BY window_start, window_end, name, s)) WHERE rn = 1"
    )
    events = [
        {"name": "a", "ts": 100, "n": 1, "s": "p"}, {"name": "a", "ts": 200, "n": 1, "s": "q"},
        {"name": "a", "ts": 300, "n": 1, "s": "q"}, {"name": "b", "ts": 400, "n": 1, "s": "p"},
        {"name": "a", "ts": 9_000, "n": 1, "s": "p"},
    ]  # fmt: skip
    for p in (1, 2):
        rows = testing.run(_job(tmp_path, view), events, parallelism=p).by_operator["r"]
        assert sorted((r["key"], r["s"], r["c"]) for r in rows) == [
            ("a", "p", 1), ("a", "q", 2), ("b", "p", 1)
        ]  # fmt: skip


def test_explain_names_the_view_and_the_backfill_refuses_it(tmp_path: Path) -> None:
    from weir import JobDefinitionError
    from weir.engine.spark.plan import backfill_operator

    job = _job(tmp_path, _view("tumble", "keep-last"))
    assert "window deduplication (keep last), partitioned by name" in str(describe(job))
    assert window_views(job.operators) == [
        ("r", "window Top-N or deduplication (ROW_NUMBER() over a window TVF)")
    ]
    with pytest.raises(JobDefinitionError, match=r"'r' of job 'wrank' is a window Top-N"):
        backfill_operator(job, "r")


REFUSED = {
    "no window bounds": (
        _view("tumble", "top2").replace("PARTITION BY window_start, window_end, name",
                                        "PARTITION BY window_start, name"),
        SqlUnsupported, "PARTITION BY window_start, window_end",
    ),
    "session": (
        _view("tumble", "top2").replace(TVFS["tumble"][0],
                                        "SESSION(TABLE t PARTITION BY name, DESCRIPTOR(ts), "
                                        "INTERVAL '5' SECOND)"),
        SqlUnsupported, "SESSION is not supported",
    ),
    "aggregate without a tvf": (
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
        "ORDER BY c DESC) AS rn FROM (SELECT name, COUNT(*) AS c FROM t GROUP BY name)) "
        "WHERE rn <= 3",
        SqlUnsupported, "ranks an aggregate without a window TVF",
    ),
    "aggregate partitioned by a non-group column": (
        AGG_TOP2.replace("PARTITION BY window_start, window_end",
                         "PARTITION BY window_start, window_end, total"),
        SqlUnsupported, "partitions by its window and GROUP BY columns",
    ),
    "aggregate with window_time": (
        AGG_TOP2.replace("COUNT(*) AS c", "COUNT(*) AS c, window_time"),
        SqlUnsupported, "window_time in a ranked window aggregate",
    ),
    "unknown order column": (
        _view("tumble", "top2").replace("ORDER BY n", "ORDER BY m"), SqlError, "unknown column",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(tmp_path: Path, case: str) -> None:
    view, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        _job(tmp_path, view)


def test_the_example_file_runs_each_view_alike_at_parallelism_1_and_2() -> None:
    """``app/examples/sql_windows.sql`` (the reference page's blocks) over ad events with late
    ones: the same rows at parallelism 1 and 2, at most 3 ranks per id and minute in value
    order, one deduplicated row, and both sides of the FULL join present."""
    from tests.support import make_events
    from weir.engine.runtime.loader import load_job

    path = Path(__file__).resolve().parents[2] / "app" / "examples" / "sql_windows.sql"
    events = make_events(2_000, seed=5, start=0, step=3_000, far_lag=(1_000, 90_000))
    one, two = (testing.run(load_job(path), events, parallelism=p) for p in (1, 2))
    for view in ("best_per_minute", "last_per_minute", "clicked_per_minute"):
        assert sorted(map(repr, one.by_operator[view])) == sorted(
            map(repr, two.by_operator[view])
        ), view
    cells: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in one.by_operator["best_per_minute"]:
        cells[(r["key"], r["window_start"])].append(r)
    assert all([r["rn"] for r in rows] == list(range(1, len(rows) + 1)) for rows in cells.values())
    assert all(
        [r["value"] for r in rows] == sorted((r["value"] for r in rows), reverse=True)
        for rows in cells.values()
    )
    last = Counter((r["key"], r["window_start"]) for r in one.by_operator["last_per_minute"])
    assert set(last) == set(cells) and set(last.values()) == {1}
    joined = one.by_operator["clicked_per_minute"]
    assert any(r["shown"] is None for r in joined) and any(r["clicked"] is None for r in joined)
    assert one.side["best_per_minute"]["late"]  # the far-lagged rows


class _Value:
    def __init__(self, cells: dict[str, Any], name: str) -> None:
        self._cells, self._name = cells, name

    def get(self, default: Any = None) -> Any:
        return self._cells.get(self._name, default)

    def set(self, value: Any) -> None:
        self._cells[self._name] = value

    def clear(self) -> None:
        self._cells.pop(self._name, None)


class _Ctx:
    """The part of a keyed process context the window views use (isolates the function)."""

    def __init__(self, retention_ms: int) -> None:
        self.key, self.timestamp, self.watermark = "a", None, -(2**63)
        self.retention_ms = retention_ms
        self.cells: dict[str, Any] = {}
        self.timers: list[int] = []
        self.emitted: list[dict[str, Any]] = []

    def value(self, name: str) -> _Value:
        return _Value(self.cells, name)

    def register_event_time_timer(self, t: int) -> None:
        self.timers.append(t)

    def emit(self, record: Any) -> None:
        self.emitted.append(record)


def test_a_keys_last_ranking_is_forgotten_after_the_retention_but_not_after_the_end(
    tmp_path: Path,
) -> None:
    from weir.engine.nodes import ProcessNode
    from weir.engine.watermarks import MAX_WATERMARK

    op = _job(tmp_path, _view("tumble", "top2")).operators["r"]
    assert isinstance(op, ProcessNode)
    for end_of_input in (False, True):
        fn, ctx = op.function, _Ctx(retention_ms=60_000)
        ctx.timestamp, ctx.watermark = 100, 0
        fn.process({"name": "a", "ts": 100, "n": 3, "s": None}, ctx)
        ctx.watermark = 4_999
        fn.on_timer(4_999, ctx)
        assert [r["n"] for r in ctx.cells["last"]["rows"]] == [3]
        assert ctx.timers == [4_999, 4_999 + 60_000]
        ctx.watermark = MAX_WATERMARK if end_of_input else 64_999
        fn.on_timer(64_999, ctx)
        assert ("last" in ctx.cells) is end_of_input
