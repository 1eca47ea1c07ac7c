"""SQL's rules where weir's job API has its own, each checked on a SQL view and on the job-API job
that gives the same rows (issue 41). Expected rows derived from Flink's documented semantics:

- NULLs: SUM/MIN/MAX/AVG/COUNT(col) pass over a NULL; the row still counts in COUNT(*), feeds
  every other aggregate and extends its session; an aggregate of only NULLs is NULL;
- result types: AVG over integers is an integer (15 / 4 = 3, -15 / 4 = -3: Java's long
  division), SUM of INT an int, of DOUBLE a float, COUNT an int; CAST in the select list;
- declared column types are enforced at the source (a dead letter names the column);
- the watermark of ``WATERMARK FOR ts AS ts - INTERVAL 'd'`` is ``max(ts) - d``: a row at the
  watermark is late in SQL and on time under the DataStream rule (``max - d - 1``);
- the late decision comes before the NULL and type checks;
- NULL group keys: their own group, ``null`` in a result, ``\\N`` as a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, agg, sources, testing, windows
from weir.engine.sql import composite_key, load_script
from weir.state.keygroups import NULL_KEY, canonical_key

TABLE = """CREATE TABLE t (id STRING, ts BIGINT, n INT, x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('url' = 'file:///unused.jsonl');"""


def _sql(tmp_path: Path, view: str, table: str = TABLE, settings: str = "") -> Job:
    path = tmp_path / "semantics.sql"
    path.write_text(f"SET 'pipeline.name' = 'sem';\n{table}\n{settings}\nCREATE VIEW v AS {view};")
    return load_script(path)


def _python(
    window: windows.WindowAssigner, key: Any = "id", delay_ms: int = 1_000, **aggs: Any
) -> Job:
    job = Job("sem")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.sql_delay(ms=delay_ms),
        )
        .key_by(key)
        .window(window)
        .aggregate("v", **aggs)
    )
    return job


def _both(tmp_path: Path, view: str, python: Job, events: list[dict[str, Any]]) -> Any:
    """The view's result at parallelism 1, asserted equal to the job API's and to both at
    parallelism 2 and 4."""
    got = testing.run(_sql(tmp_path, view), events)
    assert testing.run(python, events).by_operator == got.by_operator
    want = sorted(map(repr, got.by_operator["v"]))
    for p in (2, 4):
        for job in (_sql(tmp_path, view), python):
            assert sorted(map(repr, testing.run(job, events, parallelism=p).results)) == want
    return got


NULLS = [
    {"id": "a", "ts": 100, "n": 1, "x": None},
    {"id": "a", "ts": 200, "n": None, "x": None},
    {"id": "b", "ts": 300, "n": None, "x": 2.5},
    {"id": "b", "ts": 400, "n": 7, "x": None},
    {"id": "b", "ts": 500},  # no n, no x: both read as NULL
]


def test_aggregates_pass_over_nulls_and_count_star_counts_every_row(tmp_path: Path) -> None:
    view = (
        "SELECT id, window_start, window_end, COUNT(*) AS rows_, COUNT(n) AS ns, SUM(n) AS s, "
        "MIN(x) AS lo, MAX(x) AS hi, AVG(x) AS mean FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
        "INTERVAL '1' SECOND)) GROUP BY id, window_start, window_end"
    )
    python = _python(
        windows.tumbling(ms=1_000),
        rows_=agg.count(),
        ns=agg.count("n"),
        s=agg.sum("n", nulls="skip"),
        lo=agg.min("x", nulls="skip"),
        hi=agg.max("x", nulls="skip"),
        mean=agg.avg("x"),
    )
    got = _both(tmp_path, view, python, NULLS)
    assert not got.dead
    shown = ("key", "rows_", "ns", "s", "lo", "hi", "mean")
    assert [{k: r[k] for k in shown} for r in got.results] == [
        {"key": "a", "rows_": 2, "ns": 1, "s": 1, "lo": None, "hi": None, "mean": None},
        {"key": "b", "rows_": 3, "ns": 1, "s": 7, "lo": 2.5, "hi": 2.5, "mean": 2.5},
    ]  # fmt: skip


def test_a_row_with_a_null_still_extends_its_session(tmp_path: Path) -> None:
    """The NULL row at 1 500 bridges 1 000 and 2 000 (gap 600 ms): one session, as in Flink; a
    NULL that sent its row away would leave two."""
    events = [
        {"id": "a", "ts": 1_000, "n": 1},
        {"id": "a", "ts": 1_500, "n": None},
        {"id": "a", "ts": 2_000, "n": 2},
    ]
    view = (
        "SELECT id, SESSION_START(ts, INTERVAL '600' MILLISECOND), COUNT(*) AS c, SUM(n) AS s "
        "FROM t GROUP BY id, SESSION(ts, INTERVAL '600' MILLISECOND)"
    )
    python = _python(windows.session(gap_ms=600), c=agg.count(), s=agg.sum("n", nulls="skip"))
    got = _both(tmp_path, view, python, events)
    assert [(r["start"], r["end"], r["c"], r["s"]) for r in got.results] == [(1_000, 2_600, 3, 3)]


def test_result_types_follow_flinks(tmp_path: Path) -> None:
    events = [{"id": "a", "ts": i, "n": n, "x": float(n)} for i, n in enumerate([1, 2, 5, 7])]
    events += [{"id": "b", "ts": i, "n": -n, "x": -float(n)} for i, n in enumerate([1, 2, 5, 7])]
    view = (
        "SELECT id, window_start, window_end, AVG(n) AS avg_n, AVG(x) AS avg_x, SUM(n) AS sum_n, "
        "SUM(x) AS sum_x, COUNT(*) AS c, CAST(AVG(n) AS DOUBLE) AS avg_double, "
        "CAST(SUM(x) AS BIGINT) AS sum_bigint, CAST(COUNT(*) AS STRING) AS c_text "
        "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
        "GROUP BY id, window_start, window_end"
    )
    python = _python(
        windows.tumbling(ms=1_000),
        avg_n=agg.avg("n"), avg_x=agg.avg("x"), sum_n=agg.sum("n", nulls="skip"),
        sum_x=agg.sum("x", nulls="skip"), c=agg.count(),
        avg_double=agg.cast(agg.avg("n"), "float"),
        sum_bigint=agg.cast(agg.sum("x", nulls="skip"), "int"),
        c_text=agg.cast(agg.count(), "str"),
    )  # fmt: skip
    a, b = _both(tmp_path, view, python, events).results
    # 15 / 4 = 3 and -15 / 4 = -3 (truncated toward zero, as Java divides longs)
    assert (a["avg_n"], b["avg_n"], a["avg_x"], b["avg_x"]) == (3, -3, 3.75, -3.75)
    assert [type(a[k]) for k in ("avg_n", "avg_x", "sum_n", "sum_x", "c")] == [
        int, float, int, float, int,
    ]  # fmt: skip
    assert (a["avg_double"], a["sum_bigint"], b["sum_bigint"], a["c_text"]) == (3.0, 15, -15, "4")


BAD = [
    ({"id": "a", "ts": 1, "n": "7"}, "column 'n' is declared INT and the record holds str '7'"),
    ({"id": "a", "ts": 1, "n": 1.5}, "column 'n' is declared INT and the record holds float 1.5"),
    ({"id": "a", "ts": 1, "n": True}, "column 'n' is declared INT and the record holds bool"),
    ({"id": "a", "ts": 1, "n": 2**31}, "column 'n' is declared INT and the record holds int"),
    ({"id": "a", "ts": 1, "x": "2.5"}, "column 'x' is declared DOUBLE and the record holds str"),
    ({"id": ["a"], "ts": 1}, "column 'id' is declared STRING and the record holds list"),
    ({"id": None, "ts": 1}, "column 'id' is declared NOT NULL and the record's is NULL"),
]


def test_declared_types_are_enforced_at_the_source(tmp_path: Path) -> None:
    table = TABLE.replace("id STRING", "id STRING NOT NULL")
    view = (
        "SELECT id, window_start, window_end, COUNT(*) AS c, SUM(n) AS s, SUM(x) AS sx "
        "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
        "GROUP BY id, window_start, window_end"
    )
    good = [
        {"id": 5, "ts": 10, "n": 3.0, "x": 2},  # converted: id '5', n 3, x 2.0
        {"id": True, "ts": 20, "n": -(2**31), "x": 0.5},  # id 'true'
    ]
    got = testing.run(_sql(tmp_path, view, table), good + [e for e, _ in BAD])
    assert [r["input"] for r in got.dead] == [e for e, _ in BAD]
    for dead, (_, reason) in zip(got.dead, BAD, strict=True):
        assert reason in dead["reason"]
    rows = sorted((r["key"], r["c"], r["s"], r["sx"]) for r in got.results)
    assert rows == [("5", 1, 3, 2.0), ("true", 1, -(2**31), 0.5)]
    assert type(rows[0][2]) is int and type(rows[0][3]) is float


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_the_sql_watermark_is_max_minus_the_delay_the_datastream_one_less(
    tmp_path: Path, parallelism: int
) -> None:
    """After 5 999 the SQL watermark is 4 999: the window [0, 5 000) has fired and a row at
    4 999 is late (Flink SQL drops it). The DataStream rule's watermark is 4 998: on time."""
    events = [{"id": "a", "ts": 5_999, "n": 1}, {"id": "a", "ts": 4_999, "n": 1}]
    view = (
        "SELECT id, window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY id, window_start, window_end"
    )
    sql = testing.run(_sql(tmp_path, view), events, parallelism=parallelism)
    assert [(r["start"], r["c"]) for r in sql.results] == [(5_000, 1)]
    assert [(r["ts"], r["watermark"]) for r in sql.late] == [(4_999, 4_999)]
    python = _python(windows.tumbling(ms=5_000), c=agg.count())
    assert testing.run(python, events, parallelism=parallelism).by_operator == sql.by_operator
    datastream = Job("ds")
    (
        datastream.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
        )
        .key_by("id")
        .window(windows.tumbling(ms=5_000))
        .aggregate("v", c=agg.count())
    )
    ds = testing.run(datastream, events, parallelism=parallelism)
    assert sorted((r["start"], r["c"]) for r in ds.results) == [(0, 1), (5_000, 1)]
    assert not ds.late


LATE_SHAPES = {
    "tumbling": windows.tumbling(ms=1_000),
    "sliding": windows.sliding(size_ms=2_000, slide_ms=1_000),
    "cumulate": windows.cumulate(size_ms=2_000, step_ms=1_000),
    "session": windows.session(gap_ms=500),
}


@pytest.mark.parametrize("shape", sorted(LATE_SHAPES))
@pytest.mark.parametrize("value", [None, "text"])
def test_the_late_decision_comes_before_the_value_checks(shape: str, value: Any) -> None:
    """A late record whose aggregated value cannot be folded (a NULL where ``agg.sum`` rejects
    NULLs, a string) goes to the late output, as in Flink; the same record on time is a dead
    letter."""
    job = Job("late")
    (
        job.source(sources.jsonl("/unused.jsonl"), timestamp="ts", watermarks=WatermarkStrategy())
        .key_by("id")
        .window(LATE_SHAPES[shape])
        .aggregate("v", s=agg.sum("v"))
    )
    events = [
        {"id": "a", "ts": 10_000, "v": 1},
        {"id": "a", "ts": 100, "v": value},  # late: every window of it is past
        {"id": "a", "ts": 10_100, "v": value},  # on time
    ]
    got = testing.run(job, events)
    assert [r["record"]["ts"] for r in got.late] == [100]
    assert [r["input"]["ts"] for r in got.dead] == [10_100]


def test_a_late_sql_row_with_a_null_goes_to_the_late_output(tmp_path: Path) -> None:
    view = (
        "SELECT id, window_start, window_end, SUM(n) AS s FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY id, window_start, window_end"
    )
    events = [{"id": "a", "ts": 10_000, "n": 1}, {"id": "a", "ts": 100, "n": None}]
    got = testing.run(_sql(tmp_path, view), events)
    assert [r["record"] for r in got.late] == [{"id": "a", "ts": 100, "n": None}]
    assert not got.dead


def test_a_null_group_key_is_its_own_group_printed_null(tmp_path: Path) -> None:
    events = [
        {"id": None, "ts": 1, "n": 1},
        {"id": "null", "ts": 2, "n": 2},  # the string, not the NULL
        {"id": "\\N", "ts": 3, "n": 3},  # the NULL key's form, as a string
        {"ts": 4, "n": 4},  # no id: NULL
    ]
    view = (
        "SELECT id, window_start, window_end, SUM(n) AS s FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY id, window_start, window_end"
    )
    python = _python(
        windows.tumbling(ms=1_000), key=lambda e: e.get("id"), s=agg.sum("n", nulls="skip")
    )
    got = _both(tmp_path, view, python, events)
    assert sorted((str(r["key"]), r["s"]) for r in got.results) == [
        ("None", 5), ("\\N", 3), ("null", 2),
    ]  # fmt: skip
    assert canonical_key(None) == NULL_KEY != canonical_key("\\N")


def test_a_null_in_a_composite_key_is_backslash_n(tmp_path: Path) -> None:
    events = [{"id": "a", "ts": 1, "n": None, "x": 1.0}, {"id": "a", "ts": 2, "n": 3, "x": 2.0}]
    view = (
        "SELECT id, n, window_start, window_end, SUM(x) AS s FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY id, n, window_start, window_end"
    )
    got = testing.run(_sql(tmp_path, view), events)
    assert sorted(r["key"] for r in got.results) == [composite_key("a", 3), "a|\\N"]


@pytest.mark.parametrize("trigger", [None, "count"])
def test_a_record_in_a_gap_between_windows_is_in_none_and_not_late(trigger: str | None) -> None:
    """HOP with slide 30 ms and size 10 ms: [0, 10), [30, 40), …; a record at 15 is in no
    window, neither counted nor late (Flink's sliding windows drop it the same way)."""
    from weir import triggers

    job = Job("gaps")
    windowed = (
        job.source(sources.jsonl("/unused.jsonl"), timestamp="ts", watermarks=WatermarkStrategy())
        .key_by("id")
        .window(windows.sliding(size_ms=10, slide_ms=30))
    )
    if trigger:
        windowed = windowed.trigger(triggers.count(1))
    windowed.aggregate("v", c=agg.count())
    events = [{"id": "a", "ts": t} for t in (1, 5, 15, 29, 31, 62)]
    got = testing.run(job, events)
    counts = {(r["start"], r["c"]) for r in got.results}  # 15 and 29 counted nowhere
    assert counts == ({(0, 1), (0, 2), (30, 1), (60, 1)} if trigger else {(0, 2), (30, 1), (60, 1)})
    assert not got.late and not got.dead


def test_the_generated_column_check_takes_any_column_name_and_never_changes_the_record() -> None:
    from sqlglot import exp

    from weir.engine.sql.columns import ColumnTypeError, checker

    d = exp.DType
    check = checker(
        {"it's": (d.DOUBLE, False), "a b": (d.BIGINT, True), "é": (d.FLOAT, False)}, "odd"
    )
    rec = {"it's": 1, "a b": 2.0, "é": 3}
    assert check(rec) == {"it's": 1.0, "a b": 2, "é": 3.0}
    assert rec == {"it's": 1, "a b": 2.0, "é": 3}  # the input is left as it was
    same = {"it's": 1.5, "a b": 2, "é": None}
    assert check(same) is same
    with pytest.raises(ColumnTypeError, match="column 'a b' is declared NOT NULL"):
        check({"it's": 1.0})
