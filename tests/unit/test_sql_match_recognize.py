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
    ],
    ids=["alternation", "order-by", "all-rows", "define-unknown", "measure-unqualified",
         "empty-match"],
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
