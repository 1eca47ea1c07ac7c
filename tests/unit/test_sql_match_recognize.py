"""``MATCH_RECOGNIZE`` in Stream SQL (``engine/sql/recognize.py``), run in-process by
``weir.testing``: Flink's ``MatchRecognizeITCase`` cases where weir runs them (the Flink test's
name in each test's; Flink's run in processing time on arrival order, weir's in event time, so
the rows' times are their arrival order), and what weir refuses, by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources, testing
from weir.engine.sql import load_script
from weir.engine.sql.errors import SqlError, SqlUnsupported


def run(query: str, rows: list[dict[str, Any]], bound_ms: int = 0) -> list[dict[str, Any]]:
    job = Job("mr")
    table = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="rowtime",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(bound_ms),
    )
    job.sql("matches", query, tables={"MyTable": table})
    out = testing.run(job, rows)
    assert out.dead == []
    return out.results


def _rows(*items: tuple[Any, ...], names: tuple[str, ...] = ("id", "name")) -> list[dict[str, Any]]:
    return [
        {"rowtime": i, **dict(zip(names, item, strict=True))} for i, item in enumerate(items, 1)
    ]


def test_testSimplePattern() -> None:
    rows = _rows((1, "a"), (2, "z"), (3, "b"), (4, "c"), (5, "d"), (6, "a"), (7, "b"), (8, "c"),
                 (9, "h"))  # fmt: skip
    query = """
        SELECT T.aid, T.bid, T.cid FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES A.id AS aid, B.id AS bid, C.id AS cid
          PATTERN (A B C)
          DEFINE A AS name = 'a', B AS name = 'b', C AS name = 'c'
        ) AS T"""
    assert run(query, rows) == [{"aid": 6, "bid": 7, "cid": 8}]


def test_testSimplePatternWithNulls() -> None:
    names = ("id", "name", "nullField")
    items = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, None), (6, "a"), (7, "b"), (8, "c"),
             (9, None)]  # fmt: skip
    rows = _rows(*((i, n, None) for i, n in items), names=names)
    query = """
        SELECT T.aid, T.bNull, T.cid, T.aNull FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES A.id AS aid, A.nullField AS aNull, LAST(B.nullField) AS bNull, C.id AS cid
          PATTERN (A B C)
          DEFINE
            A AS name = 'a' AND nullField IS NULL,
            B AS name = 'b' AND LAST(A.nullField) IS NULL,
            C AS name = 'c'
        ) AS T"""
    got = sorted((r["aid"], r["bNull"], r["cid"], r["aNull"]) for r in run(query, rows))
    assert got == [(1, None, 3, None), (6, None, 8, None)]


def test_partitions_quantifiers_measures_and_skip_past_last_row() -> None:
    """A V shape per symbol: a start, falling prices (greedy ``B+``), a rise above the start."""
    prices = [10, 8, 7, 9, 12, 11, 5, 13]
    rows = [{"rowtime": t, "symbol": s, "price": p}
            for t, p in enumerate(prices, 1) for s in ("ACME", "BETA")]  # fmt: skip
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          PARTITION BY symbol ORDER BY rowtime
          MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS bottom,
                   COUNT(B.price) AS falls, AVG(B.price) AS mean, C.rowtime AS at
          ONE ROW PER MATCH
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (A B+ C)
          DEFINE B AS B.price < A.price, C AS C.price > A.price
        )"""
    got = sorted(run(query, rows), key=lambda r: (r["symbol"], r["at"]))
    for symbol in ("ACME", "BETA"):
        mine = [r for r in got if r["symbol"] == symbol]
        assert mine == [
            {"symbol": symbol, "start_price": 10, "bottom": 9, "falls": 3, "mean": 8, "at": 5},
            {"symbol": symbol, "start_price": 11, "bottom": 5, "falls": 1, "mean": 5, "at": 8},
        ]


def test_reluctant_bounded_and_optional_quantifiers() -> None:
    rows = _rows(*((i, n) for i, n in enumerate("abbbc", 1)))
    measures = "MEASURES FIRST(A.id) AS a, COUNT(B.id) AS bs, C.id AS c"
    base = "SELECT * FROM MyTable MATCH_RECOGNIZE (ORDER BY rowtime {m} PATTERN ({p}) DEFINE {d})"
    define = "A AS name = 'a', B AS name = 'b', C AS name = 'c'"
    two = run(base.format(m=measures, p="A B{2} C", d=define), rows)
    assert two == []  # three bs in a row: B{2} then C does not fit
    some = run(base.format(m=measures, p="A B{1,3} C", d=define), rows)
    assert some == [{"a": 1, "bs": 3, "c": 5}]
    maybe = run(base.format(m=measures, p="A X? B+ C", d=define + ", X AS name = 'x'"), rows)
    assert maybe == [{"a": 1, "bs": 3, "c": 5}]


def test_skip_to_next_row_is_the_default_and_overlapping_matches_come_out() -> None:
    rows = _rows(*((i, "a") for i in range(1, 5)))
    query = """SELECT * FROM MyTable MATCH_RECOGNIZE (ORDER BY rowtime
               MEASURES FIRST(A.id) AS first_id, LAST(A.id) AS last_id
               PATTERN (A{2}) DEFINE A AS name = 'a')"""
    got = sorted((r["first_id"], r["last_id"]) for r in run(query, rows))
    assert got == [(1, 2), (2, 3), (3, 4)]
    past = run(query.replace("PATTERN", "AFTER MATCH SKIP PAST LAST ROW PATTERN"), rows)
    assert sorted((r["first_id"], r["last_id"]) for r in past) == [(1, 2), (3, 4)]


def test_rows_are_matched_in_event_time_whatever_their_arrival() -> None:
    """Flink's ``testEventsAreProperlyOrdered``, its rowtime part (weir orders by the time
    attribute only)."""
    rows = [
        {"rowtime": 20, "id": 2, "name": "b"},
        {"rowtime": 10, "id": 1, "name": "a"},
        {"rowtime": 30, "id": 3, "name": "c"},
    ]
    query = """SELECT * FROM MyTable MATCH_RECOGNIZE (ORDER BY rowtime
               MEASURES A.id AS aid, B.id AS bid, C.id AS cid PATTERN (A B C)
               DEFINE A AS name = 'a', B AS name = 'b', C AS name = 'c')"""
    assert run(query, rows, bound_ms=50) == [{"aid": 1, "bid": 2, "cid": 3}]


@pytest.mark.parametrize(
    ("clause", "error", "message"),
    [
        ("ORDER BY rowtime PATTERN (A | B) DEFINE A AS id > 0", SqlUnsupported, "alternation"),
        ("ORDER BY id PATTERN (A) DEFINE A AS id > 0", SqlUnsupported, "time attribute"),
        ("ORDER BY rowtime ALL ROWS PER MATCH PATTERN (A) DEFINE A AS id > 0", SqlUnsupported,
         "ONE ROW PER MATCH"),
        ("ORDER BY rowtime PATTERN (A) DEFINE Z AS id > 0", SqlError, "no variable Z"),
        ("ORDER BY rowtime MEASURES id AS x PATTERN (A) DEFINE A AS id > 0", SqlUnsupported,
         "name its variable"),
        ("ORDER BY rowtime PATTERN (A*) DEFINE A AS id > 0", SqlError, "can match no event"),
        ("ORDER BY rowtime PATTERN (A B) DEFINE B AS NEXT(B.id) > id", SqlUnsupported,
         "NEXT reads rows after the current one"),
        ("ORDER BY rowtime PATTERN (A B) DEFINE A AS id > PREV(id)", SqlUnsupported,
         "guarantees only 0 row"),
        ("ORDER BY rowtime PATTERN (A? B) DEFINE B AS id > PREV(id)", SqlUnsupported,
         "guarantees only 0 row"),
        ("ORDER BY rowtime PATTERN (A B C) DEFINE C AS id > PREV(B.id)", SqlUnsupported,
         "PREV reads back from the current row"),
        ("ORDER BY rowtime MEASURES PREV(A.id) AS p PATTERN (A) DEFINE A AS id > 0",
         SqlUnsupported, "physical offsets are read in DEFINE only"),
        ("ORDER BY rowtime PATTERN (A) DEFINE A AS MATCH_ROWTIME() > 0", SqlUnsupported,
         "MATCH_ROWTIME\\(\\) is a measure"),
        ("ORDER BY rowtime MEASURES MATCH_ROWTIME(id) AS t PATTERN (A) DEFINE A AS id > 0",
         SqlUnsupported, "no argument or the time attribute"),
        ("ORDER BY rowtime MEASURES LAST(A.id, B.id) AS t PATTERN (A B) DEFINE A AS id > 0",
         SqlUnsupported, "offset must be a whole number"),
        ("ORDER BY rowtime MEASURES FIRST(A.id + B.id) AS t PATTERN (A B) DEFINE A AS id > 0",
         SqlUnsupported, "one variable's columns at a time"),
        ("ORDER BY rowtime PATTERN (A) WITHIN INTERVAL '0' SECOND DEFINE A AS id > 0", SqlError,
         "WITHIN"),
    ],
    ids=["alternation", "order-by", "all-rows", "define-unknown", "measure-unqualified",
         "empty-match", "next", "prev-before-the-match", "prev-past-an-optional",
         "prev-of-another-variable", "prev-in-measures", "match-rowtime-in-define",
         "match-rowtime-of-a-column", "offset-not-a-literal", "first-over-two-variables",
         "within-zero"],
)  # fmt: skip
def test_what_is_not_supported_is_refused_by_name(
    clause: str, error: type[Exception], message: str
) -> None:
    job = Job("mr")
    table = job.source(sources.jsonl("/unused.jsonl"), timestamp="rowtime")
    with pytest.raises(error, match=message):
        job.sql("m", f"SELECT * FROM MyTable MATCH_RECOGNIZE ({clause})", tables={"MyTable": table})


def test_a_sql_job_file_declares_a_match_recognize_view(tmp_path: Path) -> None:
    """``CREATE VIEW … AS SELECT … MATCH_RECOGNIZE``: the view is a pattern operator over the
    table's declared columns and time attribute."""
    path = tmp_path / "job.sql"
    path.write_text(
        "CREATE TABLE ticks (symbol STRING, price INT, ts BIGINT, "
        "WATERMARK FOR ts AS ts) WITH ('url' = 'file:///tmp/ticks.jsonl');\n"
        "CREATE VIEW rises AS SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol "
        "ORDER BY ts MEASURES A.price AS low, B.price AS high AFTER MATCH SKIP PAST LAST ROW "
        "PATTERN (A B) DEFINE B AS B.price > A.price);\n"
    )
    job = load_script(path)
    rows = [{"symbol": "X", "price": p, "ts": t} for t, p in enumerate([5, 3, 4, 9, 2], 1)]
    assert testing.run(job, rows).results == [{"symbol": "X", "low": 3, "high": 4}]


def test_weir_explain_shows_the_pattern_the_query_compiles_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from weir.engine.explain import describe, render

    monkeypatch.setenv("WEIR_COLUMNAR", "auto")  # the reason shown is the default path's

    job = Job("mr")
    table = job.source(sources.jsonl("/unused.jsonl"), timestamp="rowtime")
    job.sql("m", """SELECT * FROM MyTable MATCH_RECOGNIZE (PARTITION BY sym ORDER BY rowtime
            MEASURES FIRST(A.id) AS a PATTERN (A B{1,3} C)
            DEFINE A AS name = 'a', B AS B.x < A.x)""", tables={"MyTable": table})  # fmt: skip
    text = render(describe(job))
    assert (
        "key_by sym\n      runs record by record (operator 'm' is not a window operator)\n"
        "      pattern operator m: skip skip_to_next\n"
    ) in text
    assert "next B where B.x < A.x (times, greedy, inner=strict, times 1..3)" in text
    assert "next C where _any_row (single)" in text  # no DEFINE: any row


# -- WITHIN, logical and physical offsets, MATCH_ROWTIME (Flink's batch MatchRecognizeITCase
#    and the stream one; the times are milliseconds here, Flink's timestamps) ------------------


def test_testTimeConstraint() -> None:
    second = 1_000
    items = [(1, "z", 1), (2, "a", 2), (3, "b", 30), (4, "c", 60), (5, "x", 100), (6, "a", 101),
             (7, "b", 131), (8, "c", 162), (9, "z", 200)]  # fmt: skip
    rows = [{"id": i, "name": n, "rowtime": t * second} for i, n, t in items]
    query = """
        SELECT T.aid, T.bid, T.cid FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES A.id AS aid, B.id AS bid, C.id AS cid
          PATTERN (A B C) WITHIN INTERVAL '1' MINUTE
          DEFINE A AS name = 'a', B AS name = 'b', C AS name = 'c'
        ) AS T"""
    assert run(query, rows) == [{"aid": 2, "bid": 3, "cid": 4}]  # 6, 7, 8 span 61 s


TICKER = [
    ("ACME", t, p, x) for t, p, x in [(1, 19, 1), (2, 17, 2), (3, 13, 3), (4, 20, 4), (5, 20, 5),
                                      (6, 26, 6), (7, 20, 7), (8, 25, 8)]
]  # fmt: skip


def _ticker(items: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [{"symbol": s, "tstamp": t, "rowtime": t, "price": p, "tax": x} for s, t, p, x in items]


def test_testLogicalOffsets() -> None:
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES
            FIRST(DOWN.tstamp) AS start_tstamp,
            LAST(DOWN.tstamp) AS bottom_tstamp,
            UP.tstamp AS end_tstamp,
            FIRST(DOWN.price + DOWN.tax + 1) AS bottom_total,
            UP.price + UP.tax AS end_total
          ONE ROW PER MATCH
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (DOWN{2,} UP)
          DEFINE
            DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
            UP AS price < FIRST(DOWN.price)
        ) AS T"""
    assert run(query, _ticker(TICKER)) == [
        {"start_tstamp": 6, "bottom_tstamp": 7, "end_tstamp": 8, "bottom_total": 33,
         "end_total": 33}
    ]  # fmt: skip


def test_testLogicalOffsetsWithStarVariable() -> None:
    rows = [{"id": i, "symbol": "ACME", "tstamp": i, "rowtime": i, "price": p}
            for i, p in enumerate([20, 19, 18, 17, 16, 15, 14, 20], 1)]  # fmt: skip
    firsts = ", ".join(f"FIRST(id, {k}) AS id{k}" for k in range(8))
    lasts = ", ".join(f"LAST(id, {k}) AS id{k + 8}" for k in range(8))
    query = f"""
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES {firsts}, {lasts}
          ONE ROW PER MATCH
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (DOWN{{2,}} UP)
          DEFINE
            DOWN AS price < LAST(price, 1) OR LAST(price, 1) IS NULL,
            UP AS price = FIRST(price) AND price > FIRST(price, 3) AND price = LAST(price, 7)
        ) AS T"""
    (row,) = run(query, rows)
    assert [row[f"id{k}"] for k in range(16)] == [1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1]


def test_testLogicalOffsetOutsideOfRangeInMeasures() -> None:
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES FIRST(DOWN.price) as first, LAST(DOWN.price) as last,
                   FIRST(DOWN.price, 5) as nullPrice
          ONE ROW PER MATCH
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (DOWN{2,} UP)
          DEFINE
            DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
            UP AS price > LAST(DOWN.price)
        ) AS T"""
    assert run(query, _ticker(TICKER[:4])) == [{"first": 19, "last": 13, "nullPrice": None}]


def test_testAggregatesWithNullInputs() -> None:
    items = [(1, "a", 10), (2, "z", 10), (3, "b", None), (4, "c", None), (5, "d", 3),
             (6, "c", 3), (7, "c", 3), (8, "c", 3), (9, "c", 2)]  # fmt: skip
    rows = _rows(*items, names=("id", "name", "price"))
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES SUM(A.price) as sumA, COUNT(A.id) as countAId, COUNT(A.price) as countAPrice,
                   COUNT(*) as countAll, COUNT(price) as countAllPrice, LAST(id) as endId
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (A+ C)
          DEFINE A AS SUM(A.price) < 30, C AS C.name = 'c'
        ) AS T"""
    assert run(query, rows) == [
        {"sumA": 29, "countAId": 7, "countAPrice": 5, "countAll": 8, "countAllPrice": 6,
         "endId": 8}
    ]  # fmt: skip


def test_match_rowtime_is_the_time_of_the_match_s_last_row() -> None:
    """Flink's ``testWindowedGroupingAppliedToMatchRecognize`` groups these by
    ``TUMBLE(matchRowtime, …)``, which weir's MATCH_RECOGNIZE view does not run (it reads a
    table); here the measure itself, on the same rows, and on two-row matches."""
    rows = [{"symbol": "ACME", "rowtime": t * 1_000, "price": p, "tax": x}
            for t, p, x in [(1, 1, 1), (2, 2, 2), (4, 1, 4), (5, 1, 3)]]  # fmt: skip
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          PARTITION BY symbol ORDER BY rowtime
          MEASURES A.price as price, A.tax as tax, MATCH_ROWTIME() as matchRowtime,
                   MATCH_ROWTIME(rowtime) as again
          ONE ROW PER MATCH
          PATTERN ({pattern})
          DEFINE A AS A.price > 0{define_b}
        ) AS T"""
    by_time = lambda r: r["matchRowtime"]  # noqa: E731
    one = sorted(run(query.format(pattern="A", define_b=""), rows), key=by_time)
    assert [(r["price"], r["tax"], r["matchRowtime"], r["again"]) for r in one] == [
        (1, 1, 1_000, 1_000), (2, 2, 2_000, 2_000), (1, 4, 4_000, 4_000), (1, 3, 5_000, 5_000)
    ]  # fmt: skip
    b = ", B AS B.price >= A.price"
    two = sorted(run(query.format(pattern="A B", define_b=b), rows), key=by_time)
    assert [(r["price"], r["matchRowtime"]) for r in two] == [(1, 2_000), (1, 5_000)]


def test_prev_reads_the_rows_of_the_match_before_the_current_one() -> None:
    """``PREV(col, n)`` in DEFINE (a physical offset, which Flink refuses): a falling run
    after a start, each fall below the row before it, then a rise above the row two back
    (10 9 7 8 fails there: 8 is above 7 but not above 9)."""
    prices = [10, 9, 7, 8, 6, 11]
    rows = [{"rowtime": t, "price": p} for t, p in enumerate(prices, 1)]
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          ORDER BY rowtime
          MEASURES FIRST(S.price) AS start, LAST(F.price) AS bottom, R.price AS rise
          AFTER MATCH SKIP PAST LAST ROW
          PATTERN (S F+ R)
          DEFINE F AS F.price < PREV(F.price), R AS price > PREV(price, 2)
        ) AS T"""
    assert run(query, rows) == [{"start": 8, "bottom": 6, "rise": 11}]


def test_testCodeSplitsAreProperlyGenerated() -> None:
    items = [(1, "a", "key1", "second_key3"), (2, "b", "key1", "second_key3"),
             (3, "c", "key1", "second_key3"), (4, "d", "key", "second_key"),
             (5, "e", "key", "second_key"), (6, "a", "key2", "second_key4"),
             (7, "b", "key2", "second_key4"), (8, "c", "key2", "second_key4"),
             (9, "f", "key", "second_key")]  # fmt: skip
    rows = _rows(*items, names=("id", "name", "key1", "key2"))
    query = """
        SELECT * FROM MyTable MATCH_RECOGNIZE (
          PARTITION BY key1, key2
          ORDER BY rowtime
          MEASURES A.id AS aid, A.key1 AS akey1, LAST(B.id) AS bid, C.id AS cid,
                   C.key2 AS ckey2
          PATTERN (A B C)
          DEFINE
            A AS name = 'a' AND key1 LIKE '%key%' AND id > 0,
            B AS name = 'b' AND LAST(A.name, 2) IS NULL,
            C AS name = 'c' AND LAST(A.name) = 'a'
        ) AS T"""
    got = sorted(run(query, rows), key=lambda r: r["aid"])
    assert [tuple(r.values()) for r in got] == [
        ("key1", "second_key3", 1, "key1", 2, 3, "second_key3"),
        ("key2", "second_key4", 6, "key2", 7, 8, "second_key4"),
    ]
