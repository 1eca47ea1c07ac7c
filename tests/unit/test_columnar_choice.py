"""Which key_by nodes run on columns (``engine/columnar.py``), what ``weir explain`` says about
it, and that a job gives the same windows, late records and dead letters with the columnar path
on and off (``WEIR_COLUMNAR``), at parallelism 1 and 2, on the keys and values the columnar path
hands to the dict operator's code: the NULL key, keys shaped like it, int keys, values that are
not numbers, ints past int64 (which cannot cross to another worker), late records that are not
numbers either."""

from __future__ import annotations

from typing import Any

import pytest

from weir import Job, WatermarkStrategy, agg, col, sources, windows
from weir.engine.columnar import operator_refusal, refusal
from weir.engine.explain import describe, render
from weir.engine.nodes import KeyByNode
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.testing import Harness, run


@pytest.fixture(autouse=True)
def _columnar_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the choice itself: the default, whatever the run's WEIR_COLUMNAR."""
    monkeypatch.delenv("WEIR_COLUMNAR", raising=False)


class Median:
    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], rec: Any) -> list[Any]:
        return [*acc, rec["v"]]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return a + b

    def result(self, acc: list[Any]) -> Any:
        return sorted(acc)[len(acc) // 2] if acc else None


def _job(assigner: Any = None, **aggregates: Any) -> Job:
    job = Job("choice")
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5),
    )
    stream.filter(lambda r: r.get("skip") is None).key_by("id").window(
        assigner or windows.tumbling(ms=10), allowed_lateness_ms=5
    ).aggregate(
        "w",
        **(
            aggregates
            or {"n": agg.count(), "s": agg.sum("v"), "hi": agg.max("v"), "m": agg.mean("v")}
        ),
    )
    return job


def _keyby(job: Job) -> KeyByNode:
    (step,) = job.sources[0].children
    (node,) = step.children  # type: ignore[attr-defined]
    assert isinstance(node, KeyByNode)
    return node


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (_job(), None),
        (_job(windows.sliding(size_ms=10, slide_ms=10)), None),
        (_job(windows.cumulate(size_ms=20, step_ms=10)), None),
        (_job(windows.sliding(size_ms=10, slide_ms=5)), "do not slide by their size"),
        (_job(windows.sliding(size_ms=5, slide_ms=10)), "do not slide by their size"),
        (_job(windows.session(gap_ms=10)), "SessionWindows"),
        (_job(med=agg.custom(Median())), "'med' of operator 'w' is user-defined"),
        # SQL's aggregates: NULL-skipping slots, count(x), avg, casts, window_time()
        (_job(s=agg.sum("v", nulls="skip")), None),
        (_job(a=agg.avg("v")), None),
        (_job(n=agg.count("v")), None),
        (_job(m=agg.cast(agg.mean("v", nulls="skip"), "int"), t=agg.window_time()), None),
        (_job(s=agg.sum(col("v") * 2)), "'s' of operator 'w' is sum of an expression"),
    ],
)
def test_a_key_by_runs_on_columns_only_when_every_operator_can(job: Job, why: str | None) -> None:
    node = _keyby(job)
    found = refusal(node)
    if why is None:
        assert found is None
        assert operator_refusal(node.children[0]) is None
    else:
        assert found is not None and why in found


def test_explain_says_how_each_key_by_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _keyby_line(_job()) == "runs on columns"
    custom = _keyby_line(_job(med=agg.custom(Median())))
    assert custom == "runs record by record (aggregate 'med' of operator 'w' is user-defined)"
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    assert _keyby_line(_job()) == "runs record by record (WEIR_COLUMNAR=off)"
    assert describe(_job())["sources"][0]["children"][0]["children"][0]["execution"] == (
        "records: WEIR_COLUMNAR=off"
    )


def _keyby_line(job: Job) -> str:
    lines = render(describe(job)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("key_by"))
    return lines[at + 1].strip()


def test_the_switch_picks_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    with Harness(_job()) as h:
        assert [type(rt) for rt in h._ops] == [ColumnWindowRuntime]
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    with Harness(_job()) as h:
        assert [type(rt) for rt in h._ops] == [WindowRuntime]


EVENTS: list[Any] = [
    {"id": "a", "ts": 1, "v": 1},
    {"id": None, "ts": 2, "v": 2},  # the NULL key, \N
    {"id": "\\N", "ts": 3, "v": 3},  # a string shaped like it: \\N
    {"id": "\\\\N", "ts": 3, "v": 4},
    {"id": "\\x", "ts": 4, "v": 5},  # a backslash, but nothing to escape
    {"id": 7, "ts": 4, "v": 6},
    {"id": "a", "ts": 5, "v": "six"},  # not a number: a dead letter
    {"id": "b", "ts": 6, "v": 2**70},  # cannot cross to another worker: a dead letter
    {"id": "b", "ts": 7, "v": -(2**63)},
    {"id": "b", "ts": 8, "v": 1},
    {"id": 1.5, "ts": 8, "v": 1},  # a float key: a dead letter
    {"ts": 9, "v": 1},  # no key
    {"id": "a", "ts": 30, "v": 1},  # the watermark passes the first window and its lateness
    {"id": "a", "ts": 2, "v": 1},  # late
    {"id": "\\N", "ts": 2, "v": "late and not a number"},  # late, so the late output
    {"id": "c", "ts": 21, "v": "on time and not a number"},  # a dead letter
    {"id": "a", "ts": 22, "v": 3, "skip": True},  # filtered out
    {"id": "a", "ts": 23, "v": 3},
]


def _plain(out: list[Any]) -> list[str]:
    return sorted(repr(sorted(r.items()) if isinstance(r, dict) else r) for r in out)


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("batch_size", [1, 4, 100])
def test_the_same_output_on_and_off(
    monkeypatch: pytest.MonkeyPatch, parallelism: int, batch_size: int
) -> None:
    on = run(_job(), EVENTS, batch_size=batch_size, parallelism=parallelism)
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    off = run(_job(), EVENTS, batch_size=batch_size, parallelism=parallelism)
    assert _plain(on.results) == _plain(off.results)
    assert _plain(on.late) == _plain(off.late)
    assert _plain(on.dead) == _plain(off.dead)
    keys = {r["key"] for r in on.results}
    assert {None, "\\N", "\\\\N", "\\x", "7", "a", "b"} <= keys
    assert [r["s"] for r in on.results if r["key"] == "b"] == [-(2**63) + 1]
    assert len(on.late) == 2 and len(on.dead) == 5


SQL_AGGS: dict[str, Any] = {
    "n": agg.count(),
    "nv": agg.count("v"),
    "s": agg.sum("v", nulls="skip"),
    "lo": agg.min("v", nulls="skip"),
    "hi": agg.max("v", nulls="skip"),
    "m": agg.mean("v", nulls="skip"),
    "a": agg.avg("v"),
    "ai": agg.cast(agg.avg("v"), "int"),
    "t": agg.window_time(),
}
NULL_EVENTS: list[Any] = [
    *EVENTS,
    {"id": "d", "ts": 24, "v": None},  # a group whose inputs are all NULL: NULL, count 0
    {"id": "d", "ts": 25},
    {"id": "e", "ts": 24},  # NULL first, then numbers: SUM starts at the first number
    {"id": "e", "ts": 25, "v": -0.0},
    {"id": "e", "ts": 26, "v": 2},
    {"id": "e", "ts": 26, "v": None},
    {"id": "f", "ts": 27, "v": 2**63 - 1},  # past int64 in the sum: Python ints
    {"id": "f", "ts": 27, "v": 5},
    {"id": "f", "ts": 28, "v": None},
    {"id": "a", "ts": 41, "v": 1},
]


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_sql_aggregates_the_same_on_and_off(
    monkeypatch: pytest.MonkeyPatch, parallelism: int, batch_size: int
) -> None:
    """SQL's aggregates (NULLs passed over, COUNT(x), AVG, a cast, window_time) on columns
    give what the dict operator gives, NULL groups and sums past int64 included."""
    on = run(_job(**SQL_AGGS), NULL_EVENTS, batch_size=batch_size, parallelism=parallelism)
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    off = run(_job(**SQL_AGGS), NULL_EVENTS, batch_size=batch_size, parallelism=parallelism)
    assert _plain(on.results) == _plain(off.results)
    assert _plain(on.late) == _plain(off.late)
    assert _plain(on.dead) == _plain(off.dead)
    by_key = {r["key"]: r for r in on.results if r["start"] == 20}
    null_group = {"n": 2, "nv": 0, "s": None, "lo": None, "m": None, "a": None, "ai": None}
    assert {k: by_key["d"][k] for k in null_group} == null_group
    assert by_key["e"]["s"] == 2.0 and by_key["e"]["nv"] == 2 and by_key["e"]["lo"] == -0.0
    assert by_key["f"]["s"] == 2**63 + 4 and by_key["f"]["ai"] == (2**63 + 4) // 2


SQL_VIEW = """SET 'pipeline.name' = 'choice-sql';
CREATE TABLE t (id STRING, ts BIGINT, v DOUBLE, skip STRING,
  WATERMARK FOR ts AS ts - INTERVAL '0.005' SECOND) WITH ('url' = 'file:///unused.jsonl');
CREATE VIEW w AS SELECT id, window_start, window_end, COUNT(*) AS n, COUNT(v) AS nv,
  SUM(v) AS s, MIN(v) AS lo, AVG(v) AS a, CAST(MAX(v) AS STRING) AS hi
FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0.01' SECOND))
WHERE skip IS NULL GROUP BY id, window_start, window_end;"""


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_sql_job_runs_on_columns_with_the_same_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, parallelism: int
) -> None:
    """A ``weir sql`` job (its CHECK map, WHERE closure and one-column GROUP BY key) runs
    on columns and gives the record path's results, late records and dead letters."""
    from weir.engine.sql import load_script

    path = tmp_path / "job.sql"
    path.write_text(SQL_VIEW)
    assert _keyby_line(load_script(path)) == "runs on columns"
    events = [{k: v for k, v in e.items() if k != "skip"} for e in NULL_EVENTS]
    events += [{"id": "a", "ts": 50, "skip": "yes"}, {"id": "g", "ts": 51, "v": 3}]
    on = run(load_script(path), events, batch_size=4, parallelism=parallelism)
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    off = run(load_script(path), events, batch_size=4, parallelism=parallelism)
    assert _plain(on.results) == _plain(off.results)
    assert _plain(on.late) == _plain(off.late)
    assert _plain(on.dead) == _plain(off.dead)
    assert {r["key"] for r in on.results} >= {None, "\\N", "a", "d", "e", "f", "g"}
