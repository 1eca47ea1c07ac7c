"""The pull-query compiler (``engine/sql/pull.py``): which read a WHERE clause implies (point
lookups, a key prefix, window-start bounds), the row filter, projection, order, limit and
aggregates over the result, and the refusals that keep a pull query read-only."""

from __future__ import annotations

import pytest

from weir.engine.sql import SqlError, SqlSyntaxError, SqlUnsupported
from weir.engine.sql.pull import (
    MAX_QUERY_CHARS,
    Summary,
    TableShape,
    ordered,
    plan_pull,
    summarize,
)

TABLES = {
    "totals": TableShape("totals", ("key", "id", "n", "total"), windowed=False),
    "imps": TableShape("imps", ("key", "window_start", "window_end", "n", "final"), windowed=True),
}


def test_key_terms_choose_point_lookups_and_the_rest_filters() -> None:
    plan = plan_pull("SELECT key, n FROM totals WHERE key IN ('a', 'b') AND n > 1", TABLES)
    assert plan.keys == ("a", "b") and plan.prefix == "" and plan.columns == ("key", "n")
    assert plan.where is not None
    assert plan.where({"key": "a", "n": 2}) and not plan.where({"key": "a", "n": 1})
    assert not plan.where({"key": "a", "n": None})  # NULL > 1 is not TRUE
    both = plan_pull("SELECT * FROM totals WHERE key IN ('a', 'b') AND key = 'b'", TABLES)
    assert both.keys == ("b",) and both.columns == TABLES["totals"].columns


def test_an_or_of_keys_is_a_listing_filtered_by_the_condition() -> None:
    plan = plan_pull("SELECT * FROM totals WHERE key = 'a' OR n > 5", TABLES)
    assert plan.keys is None and plan.prefix == ""
    assert plan.where is not None and plan.where({"key": "x", "n": 6})


def test_like_with_a_trailing_percent_is_a_prefix_and_still_filters() -> None:
    plan = plan_pull("SELECT * FROM totals WHERE key LIKE 'ad-1%'", TABLES)
    assert plan.keys is None and plan.prefix == "ad-1"
    inner = plan_pull("SELECT * FROM totals WHERE key LIKE 'ad-%1'", TABLES)
    assert inner.prefix == "" and inner.where is not None
    assert inner.where({"key": "ad-11"}) and not inner.where({"key": "ad-12"})


def test_window_start_comparisons_bound_the_windows_read() -> None:
    plan = plan_pull(
        "SELECT * FROM imps WHERE key = 'a' AND window_start >= 1000 AND window_start < 5000 "
        "AND window_start > 1500",
        TABLES,
    )
    assert (plan.start_from, plan.start_to) == (1501, 4999)
    assert plan_pull("SELECT * FROM imps WHERE window_start = 7", TABLES).start_to == 7


def test_order_limit_and_aggregates() -> None:
    plan = plan_pull("SELECT key, n FROM totals ORDER BY n DESC, key LIMIT 2", TABLES)
    assert plan.order == (("n", True), ("key", False)) and plan.limit == 2 and plan.whole
    rows = [{"key": "b", "n": 1}, {"key": "a", "n": None}, {"key": "c", "n": 1}]
    assert [r["key"] for r in ordered(list(rows), plan.order)] == ["b", "c", "a"]
    assert [r["key"] for r in ordered(list(rows), (("n", False),))] == ["a", "b", "c"]
    agg = plan_pull("SELECT COUNT(*) AS k, COUNT(n), SUM(n) AS s, AVG(n) FROM totals", TABLES)
    assert agg.summaries[1] == Summary("count(n)", "count", "n")
    assert summarize(agg.summaries, rows) == {"k": 3, "count(n)": 2, "s": 2, "avg(n)": 1.0}
    assert summarize(agg.summaries, []) == {"k": 0, "count(n)": 0, "s": None, "avg(n)": None}


REFUSED: dict[str, tuple[str, type[Exception], str]] = {
    "insert": ("INSERT INTO totals SELECT * FROM imps", SqlUnsupported, "one SELECT"),
    "update": ("UPDATE totals SET n = 1", SqlUnsupported, "one SELECT"),
    "drop": ("DROP TABLE totals", SqlUnsupported, "one SELECT"),
    "a table function": ("SELECT * FROM read_parquet('x')", SqlUnsupported, "table functions"),
    "another schema": ("SELECT * FROM main.totals", SqlUnsupported, "by its name"),
    "a function": ("SELECT key FROM totals WHERE READ_FILE('x') = 1", SqlUnsupported, "READ_FILE"),
    "a window": ("SELECT ROW_NUMBER() OVER (ORDER BY n) FROM totals", SqlUnsupported, "OVER"),
    "columns and aggregates": ("SELECT key, COUNT(*) FROM totals", SqlUnsupported, "either"),
    "unknown table": ("SELECT * FROM nope", SqlError, r"unknown table 'nope'.*imps, totals"),
    "unknown column": ("SELECT x FROM totals", SqlError, r"unknown column 'x' in 'totals'"),
    "a bad limit": ("SELECT * FROM totals LIMIT -1", SqlError, "LIMIT"),
    "order by an expression": ("SELECT * FROM totals ORDER BY n + 1", SqlUnsupported, "column"),
    "offset": ("SELECT * FROM totals LIMIT 1 OFFSET 2", SqlUnsupported, "next_cursor"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_keep_it_a_read_only_select(case: str) -> None:
    query, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        plan_pull(query, TABLES)


def test_size_and_nesting_limits() -> None:
    with pytest.raises(SqlError, match="more than a pull query may be"):
        plan_pull("SELECT * FROM totals WHERE " + "n = 1 OR " * MAX_QUERY_CHARS + "n = 2", TABLES)
    with pytest.raises(SqlSyntaxError, match="nest deeper than 32"):
        plan_pull("SELECT * FROM totals WHERE " + "(" * 33 + "n = 1" + ")" * 33, TABLES)
