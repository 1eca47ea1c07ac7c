"""Top-N and deduplication in SQL (``ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)``, issue 43)
against a brute-force model, at parallelism 1, 2 and 4 and at any batching.

The model re-sorts every row a partition has seen after each record (Python's sort is stable:
equal rows keep their arrival order; the keep-last deduplication puts the newest first among
equals, Flink's ``current >= previous``) and emits each rank whose row changed. Named after the
Flink IT cases whose shape they port (``RankITCase.testTopN``, ``DeduplicateITCase``'s
``testFirstRowOnRowtime`` / ``testLastRowOnRowtime``), derived from Flink's documented
semantics.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir import Job, WatermarkStrategy, sources, testing
from weir.engine.sql import SqlError, SqlUnsupported, load_script
from weir.testing import Harness

TABLE = """CREATE TABLE t (id STRING, ts BIGINT, v INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');
"""
TOP3 = (
    "SELECT id, v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY v DESC) AS rn "
    "FROM t WHERE v IS NOT NULL) WHERE rn <= 3"
)
LAST = (
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS rn FROM t) "
    "WHERE rn = 1"
)
FIRST = (
    "SELECT id, ts, v FROM (SELECT id, ts, v, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) "
    "AS rownum FROM t) WHERE rownum = 1"
)


def _job(tmp_path: Path, view: str) -> Job:
    path = tmp_path / "rank.sql"
    path.write_text(f"SET 'pipeline.name' = 'rank';\n{TABLE}CREATE VIEW r AS {view};")
    return load_script(path)


def _order(v: Any, desc: bool) -> tuple[Any, ...]:
    """A sort key with NULL first ascending and last descending."""
    if v is None:
        return (1,) if desc else (0,)
    return (0, -v) if desc else (1, v)


def _model(events: list[dict[str, Any]], form: str) -> dict[str, list[dict[str, Any]]]:
    seen: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    top: dict[str, list[int]] = defaultdict(list)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, e in enumerate(events):
        if form == "top3" and e["v"] is None:
            continue
        rows = seen[e["id"]]
        rows.append((i, e))
        if form == "top3":
            ranked = sorted(rows, key=lambda r: _order(r[1]["v"], True))[:3]
        elif form == "last":
            ranked = sorted(rows, key=lambda r: (-r[1]["ts"], -r[0]))[:1]
        else:
            ranked = sorted(rows, key=lambda r: r[1]["ts"])[:1]
        before = top[e["id"]]
        for rank, (j, row) in enumerate(ranked):
            if rank < len(before) and before[rank] == j:
                continue
            op = "+U" if rank < len(before) else "+I"
            shown = {
                "top3": {"id": row["id"], "v": row["v"], "rn": rank + 1},
                "last": {**row, "rn": 1},
                "first": {"id": row["id"], "ts": row["ts"], "v": row["v"]},
            }[form]
            out[e["id"]].append({"op": "r", "key": e["id"], "row_kind": op, **shown})
        top[e["id"]] = [j for j, _ in ranked]
    return dict(out)


def _per_key(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["key"]].append(r)
    return dict(out)


EVENTS = [
    {"id": "a", "ts": 5, "v": 1}, {"id": "a", "ts": 3, "v": 5}, {"id": "b", "ts": 4, "v": 2},
    {"id": "a", "ts": 5, "v": 3}, {"id": "a", "ts": 1, "v": None}, {"id": "a", "ts": 9, "v": 4},
    {"id": "b", "ts": 4, "v": 2}, {"id": "a", "ts": 2, "v": 5}, {"id": "b", "ts": 0, "v": 7},
]  # fmt: skip
FORMS = {"top3": TOP3, "last": LAST, "first": FIRST}


@pytest.mark.parametrize(
    ("flink_case", "form"),
    [("RankITCase.testTopN", "top3"), ("DeduplicateITCase.testLastRowOnRowtime", "last"),
     ("DeduplicateITCase.testFirstRowOnRowtime", "first")],
)  # fmt: skip
def test_each_form_equals_the_model_at_every_parallelism(
    tmp_path: Path, flink_case: str, form: str
) -> None:
    want = _model(EVENTS, form)
    assert want, flink_case
    for p in (1, 2, 4):
        got = testing.run(_job(tmp_path, FORMS[form]), EVENTS, parallelism=p)
        assert _per_key(got.by_operator["r"]) == want, (flink_case, p)
        assert not got.dead


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(
        st.fixed_dictionaries({
            "id": st.sampled_from(["a", "b"]), "ts": st.integers(0, 20),
            "v": st.one_of(st.none(), st.integers(0, 5)),
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
    with Harness(_job(tmp_path_factory.mktemp("rank"), FORMS[form]), parallelism=2) as h:
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            h.feed(events[lo:hi])
            h.flush()
        rows = h.finish().by_operator["r"]
    assert _per_key(rows) == _model(events, form)


def test_a_python_job_and_explain() -> None:
    from weir.engine.explain import describe

    job = Job("rank")
    events = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts",
                        watermarks=WatermarkStrategy.sql_delay(ms=1_000))  # fmt: skip
    job.sql("r", TOP3.replace("FROM t", "FROM e"), tables={"e": events})
    got = testing.run(job, EVENTS).by_operator["r"]
    assert _per_key(got) == _model(EVENTS, "top3")
    shown = str(describe(job))
    assert "ROW_NUMBER() top-3, partitioned by id, ordered by v DESC" in shown


REFUSED = {
    "no filter": (TOP3.replace(" WHERE rn <= 3", ""), SqlUnsupported, "filtered on its row number"),
    "rn = 2": (TOP3.replace("rn <= 3", "rn = 2"), SqlUnsupported, r"only rn = 1"),
    "window tvf without its bounds": (
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY v) AS rn FROM "
        "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))) WHERE rn <= 2",
        SqlUnsupported, "PARTITION BY window_start, window_end",
    ),
    "no order": (TOP3.replace(" ORDER BY v DESC", ""), SqlError, "needs ORDER BY"),
    "unknown column": (TOP3.replace("ORDER BY v", "ORDER BY w"), SqlError, "unknown column 'w'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(tmp_path: Path, case: str) -> None:
    view, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        _job(tmp_path, view)


def test_rank_and_dense_rank_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SqlUnsupported, match=r"RANK\(\) OVER .*but ROW_NUMBER\(\) in the Top-N"):
        _job(tmp_path, TOP3.replace("ROW_NUMBER()", "RANK()"))


def test_the_backfill_refuses_a_top_n_view_by_name(tmp_path: Path) -> None:
    from weir import JobDefinitionError
    from weir.engine.spark.plan import backfill_operator

    with pytest.raises(JobDefinitionError, match=r"'r' of job 'rank' is a Top-N or dedup"):
        backfill_operator(_job(tmp_path, TOP3), "r")
