"""Continuous aggregates (``GROUP BY`` without a window, issue 43): each view's upsert changelog
against a brute-force model and against the equivalent job-API process function, at
parallelism 1, 2 and 4, at any batching; the idle-state TTL; the refusals.

The model is Flink's non-windowed aggregation (``GroupAggFunction``, mini-batch off) over an
append-only input, derived from its documented semantics: every record emits its key's new row,
``+I`` for the key's first, ``+U`` after; SQL's NULL rules hold (``SUM``/``MAX``/``AVG`` pass over
NULL, ``COUNT(*)`` counts the row); without a TTL an unchanged row is not sent again. Ported from
Flink's ``AggregateITCase`` (``testCountDistinct``-style per key counts, ``testGroupByAgg``) as
named cases below.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir import Job, JobDefinitionError, WatermarkStrategy, sources, testing
from weir.engine.sql import SqlError, SqlUnsupported, composite_key, load_script
from weir.testing import Harness

TABLE = """CREATE TABLE events (id STRING, kind STRING, ts BIGINT, v INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');
"""
VIEW = (
    "SELECT id, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top, AVG(v) AS mean, "
    "COUNT(DISTINCT kind) AS kinds FROM events WHERE id <> 'skip' GROUP BY id"
)


def _script(
    tmp_path: Path, view: str = VIEW, settings_sql: str = "SET 'table.exec.state.ttl' = '0';"
) -> Job:
    path = tmp_path / "cont.sql"
    path.write_text(
        f"SET 'pipeline.name' = 'cont';\n{TABLE}{settings_sql}\nCREATE VIEW totals AS {view};"
    )
    return load_script(path)


def _model(events: list[dict[str, Any]], ttl: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Per key, the rows the view emits, by brute force: every row recomputed from all of the
    key's records so far."""
    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["id"] == "skip":
            continue
        rows = seen[e["id"]]
        rows.append(e)
        values = [r["v"] for r in rows if r["v"] is not None]
        kinds = {r["kind"] for r in rows if r["kind"] is not None}
        row = {
            "op": "totals",
            "key": e["id"],
            "row_kind": "+I" if len(rows) == 1 else "+U",
            "id": e["id"],
            "n": len(rows),
            "total": sum(values) if values else None,
            "top": max(values) if values else None,
            "mean": int(sum(values) / len(values)) if values else None,  # Java's long division
            "kinds": len(kinds),
        }
        previous = out[e["id"]][-1] if out[e["id"]] else None
        if not ttl and previous is not None and _same(previous, row):
            continue  # an unchanged row is not sent again (no TTL)
        out[e["id"]].append(row)
    return dict(out)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    kind = "row_kind"
    return {k: v for k, v in a.items() if k != kind} == {k: v for k, v in b.items() if k != kind}


def _per_key(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["key"]].append(r)
    return dict(out)


class RunningTotals:
    """The equivalent job-API job: a keyed process function keeping the aggregates itself."""

    def process(self, e: dict[str, Any], ctx: Any) -> None:
        state = ctx.value("s")
        s = state.get() or {"n": 0, "values": [], "kinds": []}
        s["n"] += 1
        if e["v"] is not None:
            s["values"].append(e["v"])
        if e["kind"] is not None and e["kind"] not in s["kinds"]:
            s["kinds"].append(e["kind"])
        values = s["values"]
        row = {
            "op": "totals", "key": ctx.key, "row_kind": "+I" if s["n"] == 1 else "+U",
            "id": e["id"], "n": s["n"],
            "total": sum(values) if values else None, "top": max(values) if values else None,
            "mean": int(sum(values) / len(values)) if values else None, "kinds": len(s["kinds"]),
        }  # fmt: skip
        if s.get("last") != {k: v for k, v in row.items() if k != "row_kind"}:
            ctx.emit(row)
        s["last"] = {k: v for k, v in row.items() if k != "row_kind"}
        state.set(s)


def _python_job() -> Job:
    job = Job("cont")
    (
        job.source(sources.jsonl("/unused.jsonl"), timestamp="ts",
                   watermarks=WatermarkStrategy.sql_delay(ms=1_000))
        .filter(lambda e: e["id"] != "skip")
        .key_by("id")
        .process(RunningTotals(), name="totals")
    )  # fmt: skip
    return job


EVENTS = [
    {"id": "a", "kind": "x", "ts": 1_000, "v": 3},
    {"id": "b", "kind": "y", "ts": 1_100, "v": None},
    {"id": "a", "kind": "y", "ts": 900, "v": 5},  # out of order: a continuous view takes it
    {"id": "skip", "kind": "x", "ts": 1_200, "v": 1},
    {"id": "a", "kind": None, "ts": 50_000, "v": None},
    {"id": "b", "kind": "y", "ts": 100, "v": -2},  # far behind the watermark: still counted
    {"id": "c", "kind": "x", "ts": 60_000, "v": 7},
    {"id": "a", "kind": "x", "ts": 60_001, "v": -1},
]


def test_group_by_agg_equals_the_model_and_the_python_job_at_every_parallelism(
    tmp_path: Path,
) -> None:
    """Flink ``AggregateITCase.testGroupByAgg``/``testCountDistinct``'s shape: per key COUNT,
    SUM, MAX, AVG and COUNT(DISTINCT) over an updating input, late rows included."""
    want = _model(EVENTS)
    assert want["b"][-1]["total"] == -2 and want["a"][1]["mean"] == 4
    for p in (1, 2, 4):
        got = testing.run(_script(tmp_path), EVENTS, parallelism=p)
        assert _per_key(got.by_operator["totals"]) == want, p
        assert not got.late and not got.dead
        python = testing.run(_python_job(), EVENTS, parallelism=p)
        assert _per_key(python.by_operator["totals"]) == want, p


def test_an_unchanged_row_is_not_sent_again_without_a_ttl(tmp_path: Path) -> None:
    view = "SELECT id, MAX(v) AS top FROM events GROUP BY id"
    events = [{"id": "a", "kind": "x", "ts": t, "v": v} for t, v in ((1, 5), (2, 3), (3, 9))]
    rows = testing.run(_script(tmp_path, view), events).by_operator["totals"]
    assert [(r["op"], r["row_kind"], r["top"]) for r in rows] == [
        ("totals", "+I", 5), ("totals", "+U", 9),
    ]  # fmt: skip
    with_ttl = _script(tmp_path, view, "SET 'table.exec.state.ttl' = '1 h';")
    rows = testing.run(with_ttl, events).by_operator["totals"]
    assert [(r["row_kind"], r["top"]) for r in rows] == [("+I", 5), ("+U", 5), ("+U", 9)]


def test_a_global_aggregate_and_a_composite_key(tmp_path: Path) -> None:
    job = _script(tmp_path, "SELECT COUNT(*) AS n, SUM(v) AS total FROM events")
    rows = testing.run(job, EVENTS).by_operator["totals"]
    assert [r["n"] for r in rows] == list(range(1, len(EVENTS) + 1))
    assert {r["key"] for r in rows} == {"*"} and rows[-1]["total"] == 13
    job = _script(tmp_path, "SELECT id, kind AS k, COUNT(*) AS n FROM events GROUP BY id, kind")
    rows = testing.run(job, EVENTS).by_operator["totals"]
    last = {r["key"]: r for r in rows}
    assert last[composite_key("a", "x")] == {
        "op": "totals", "key": "a|x", "row_kind": "+U", "id": "a", "k": "x", "n": 2,
    }  # fmt: skip
    assert last[composite_key("a", None)]["k"] is None


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(
        st.fixed_dictionaries({
            "id": st.sampled_from(["a", "b", "c", "skip"]),
            "kind": st.sampled_from(["x", "y", None]),
            "ts": st.integers(0, 10_000),
            "v": st.one_of(st.none(), st.integers(-20, 20)),
        }),
        max_size=40,
    ),
    cuts=st.lists(st.integers(1, 40), max_size=6),
    parallelism=st.sampled_from([1, 2]),
)  # fmt: skip
def test_batching_never_changes_the_changelog(
    tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, Any]], cuts: list[int],
    parallelism: int,
) -> None:  # fmt: skip
    job = _script(tmp_path_factory.mktemp("cont"))
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    with Harness(job, parallelism=parallelism) as h:
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            h.feed(events[lo:hi])
            h.flush()
        result = h.finish()
    assert _per_key(result.by_operator["totals"]) == _model(events)


def test_idle_state_ttl_forgets_a_key_and_its_next_row_begins_again(tmp_path: Path) -> None:
    """Flink's state TTL (``StateTtlITCase`` shape, processing time): a key idle past the
    retention is forgotten without a retraction; its next record is a first row (+I)."""
    job = _script(tmp_path, "SELECT id, COUNT(*) AS n FROM events GROUP BY id",
                  "SET 'table.exec.state.ttl' = '150 ms';")  # fmt: skip
    with Harness(job) as h:
        h.feed(
            [{"id": "a", "kind": "x", "ts": 1, "v": 1}, {"id": "a", "kind": "x", "ts": 2, "v": 1}]
        )
        h.flush()
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # the retention is wall-clock time by definition
            h.feed([{"id": "b", "kind": "x", "ts": 3, "v": 1}])  # b stays busy, a idles
            time.sleep(0.02)
        h.feed([{"id": "a", "kind": "x", "ts": 4, "v": 1}])
        rows = h.finish().by_operator["totals"]
    a = [(r["row_kind"], r["n"]) for r in rows if r["key"] == "a"]
    assert a == [("+I", 1), ("+U", 1 + 1), ("+I", 1)]
    b = [r["n"] for r in rows if r["key"] == "b"]
    assert b == list(range(1, len(b) + 1))  # written every 20 ms: never idle for 150 ms


REFUSED = {
    "no ttl": (
        "SELECT id, COUNT(*) AS n FROM events GROUP BY id",
        "",
        r"groups without a window \(a continuous aggregate\).*SET 'table\.exec\.state\.ttl' = "
        r"'1 h'",
    ),
    "window bound": (
        "SELECT id, window_start, COUNT(*) AS n FROM events GROUP BY id",
        "SET 'table.exec.state.ttl' = '0';",
        r"window_start.*has no window bounds",
    ),
    "reserved op": (
        "SELECT id, COUNT(*) AS op FROM events GROUP BY id",
        "SET 'table.exec.state.ttl' = '0';",
        r"'op' is a field of every changelog row",
    ),
    "bad ttl": (
        "SELECT id, COUNT(*) AS n FROM events GROUP BY id",
        "SET 'table.exec.state.ttl' = 'soon';",
        r"SET 'table\.exec\.state\.ttl' = 'soon' is not a duration",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(tmp_path: Path, case: str) -> None:
    view, setting, message = REFUSED[case]
    with pytest.raises((SqlError, SqlUnsupported), match=message):
        _script(tmp_path, view, setting)


def test_python_job_sql_takes_state_ttl_ms() -> None:
    job = Job("cont")
    events = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts",
                        watermarks=WatermarkStrategy.sql_delay(ms=1_000))  # fmt: skip
    with pytest.raises(SqlUnsupported, match=r"state_ttl_ms=3_600_000"):
        job.sql("t", "SELECT id, COUNT(*) AS n FROM e GROUP BY id", tables={"e": events})
    job.sql("t", "SELECT id, COUNT(*) AS n FROM e GROUP BY id", tables={"e": events},
            state_ttl_ms=0)  # fmt: skip
    rows = testing.run(job, EVENTS[:3]).by_operator["t"]
    assert [(r["key"], r["n"]) for r in rows] == [("a", 1), ("b", 1), ("a", 2)]


def test_the_backfill_and_explain_name_a_continuous_aggregate(tmp_path: Path) -> None:
    from weir.engine.explain import describe, render
    from weir.engine.spark.plan import backfill_operator

    job = _script(tmp_path)
    with pytest.raises(
        JobDefinitionError, match=r"'totals' of job 'cont' is a continuous aggregate"
    ):
        backfill_operator(job, "totals")
    with pytest.raises(
        JobDefinitionError, match=r"'totals' of job 'cont' is a continuous aggregate"
    ):
        backfill_operator(job, None)
    shown = str(describe(job))
    assert "continuous aggregate" in shown and "'state_ttl_ms': 0" in shown
    assert "state kept forever (TTL 0)" in render(describe(job))
    assert "count(DISTINCT kind)" in shown.replace("COUNT", "count") and "sum(v)" in shown


def test_the_sql_views_example_runs_every_new_form() -> None:
    """``app/examples/sql_views.sql`` (the reference page's blocks): its continuous aggregate
    equals the model; its Top-N, deduplication and join views give rows."""
    from tests.support import make_events

    root = Path(__file__).resolve().parents[2]
    job = load_script(root / "app" / "examples" / "sql_views.sql")
    events = [{**e, "id": str(e["id"]), "value": float(e["value"])} for e in make_events(800, 4)]
    out = testing.run(job, events).by_operator
    last = {r["key"]: r for r in out["totals"]}
    impressions = [e for e in events if e["event"] == "impression"]
    assert {k: r["n"] for k, r in last.items()} == {
        k: sum(e["id"] == k for e in impressions) for k in {e["id"] for e in impressions}
    }
    assert out["best"] and out["latest"] and out["clicked"]


def test_the_null_group_is_a_null_key_in_the_changelog_and_a_backslash_key_is_itself(
    tmp_path: Path,
) -> None:
    """A NULL id is its own group, whose changelog records say ``"key": None`` (as a window
    result does; ``\\N`` is only its stored and path form), and a real key that looks like it
    keeps its own spelling."""
    events = [
        {"id": None, "kind": "a", "ts": 1, "v": 1},
        {"id": "\\N", "kind": "a", "ts": 2, "v": 2},
        {"id": None, "kind": "a", "ts": 3, "v": 3},
    ]
    view = "SELECT id, SUM(v) AS total FROM events GROUP BY id"  # no WHERE: NULL <> x drops
    rows = testing.run(_script(tmp_path, view), events).by_operator["totals"]
    assert [(r["key"], r["id"], r["total"]) for r in rows] == [
        (None, None, 1),
        ("\\N", "\\N", 2),
        (None, None, 4),
    ]
