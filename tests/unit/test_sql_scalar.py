"""SQL's scalar expressions as weir compiles them (NULL semantics, LIKE, IN, CASE, the string
and numeric functions, CAST), and the composite key's string form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from weir.engine.sql import composite_key, parse, split_key
from weir.engine.sql.scalar import Compiler
from weir.state.keygroups import canonical_key


def evaluate(expression: str, record: dict[str, Any]) -> Any:
    select = parse(f"SELECT {expression} FROM t")[0]
    assert isinstance(select, exp.Select)
    return Compiler(lambda c: c.name).compile(select.expressions[0])(record)


ROW = {"id": "ad-7", "n": 7, "x": -7.5, "s": " pad ", "none": None}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("n + 1", 8),
        ("n * x", -52.5),
        ("n / 2", 3),  # INT / INT truncates, as in SQL
        ("-n / 2", -3),
        ("x / 2", -3.75),
        ("MOD(-7, 3)", -1),  # the dividend's sign
        ("n % 3", 1),
        ("missing + 1", None),  # a column the record lacks is NULL
        ("none = none", None),
        ("n > 3 AND none", None),
        ("n < 3 AND none", False),
        ("n > 3 OR none", True),
        ("NOT none", None),
        ("none IS NULL", True),
        ("n IS NOT NULL", True),
        ("n BETWEEN 1 AND 7", True),
        ("id IN ('ad-1', 'ad-7')", True),
        ("id NOT IN ('ad-1', 'ad-7')", False),
        ("none IN (1, 2)", None),
        ("id LIKE 'ad-_'", True),
        ("id LIKE 'a%7'", True),
        ("id LIKE 'AD%'", False),
        ("id NOT LIKE '%.%'", True),
        ("CASE WHEN n > 5 THEN 'big' ELSE 'small' END", "big"),
        ("CASE n WHEN 1 THEN 'one' WHEN 7 THEN 'seven' END", "seven"),
        ("CASE WHEN none THEN 1 END", None),
        ("UPPER(id)", "AD-7"),
        ("LOWER('AbC')", "abc"),
        ("CHAR_LENGTH(id)", 4),
        ("SUBSTRING(id, 2, 2)", "d-"),
        ("SUBSTRING(id FROM 3)", "-7"),
        ("CONCAT(id, '/', n)", "ad-7/7"),
        ("CONCAT(id, none)", None),
        ("id || '!'", "ad-7!"),
        ("TRIM(s)", "pad"),
        ("ABS(x)", 7.5),
        ("FLOOR(x)", -8.0),
        ("CEIL(x)", -7.0),
        ("FLOOR(n)", 7),
        ("CAST(x AS INT)", -7),
        ("CAST('12' AS BIGINT)", 12),
        ("CAST(n AS DOUBLE)", 7.0),
        ("CAST(n AS STRING)", "7"),
        ("CAST('true' AS BOOLEAN)", True),
        ("COALESCE(none, missing, n)", 7),
    ],
)
def test_expressions_follow_sql(expression: str, expected: Any) -> None:
    got = evaluate(expression, ROW)
    assert got == expected and type(got) is type(expected)


def test_a_value_of_the_wrong_type_raises_so_the_record_goes_to_the_dead_letters() -> None:
    with pytest.raises(TypeError):
        evaluate("id < 3", ROW)
    with pytest.raises(ZeroDivisionError):
        evaluate("n / 0", ROW)


def test_the_composite_key_form_is_documented_and_escaped() -> None:
    assert composite_key("ad-1", "click") == "ad-1|click"
    assert composite_key("a|b", 17, "c\\d") == "a\\|b|17|c\\\\d"
    assert split_key("a\\|b|17|c\\\\d") == ["a|b", "17", "c\\d"]
    with pytest.raises(TypeError, match="GROUP BY columns must be str, int or NULL"):
        composite_key("a", 1.5)


def test_a_null_group_by_column_is_backslash_n_in_the_composite_key() -> None:
    assert composite_key("ad-1", None) == "ad-1|\\N"
    assert composite_key("\\N", None) == "\\\\N|\\N"  # the string \N is escaped, NULL is not
    assert split_key("ad-1|\\N") == ["ad-1", None]
    assert split_key("\\\\N|\\N") == ["\\N", None]


@given(st.lists(st.one_of(st.none(), st.text(), st.integers()), min_size=2, max_size=4))
def test_composite_keys_are_reversible_and_unambiguous(parts: list[str | int | None]) -> None:
    key = composite_key(*parts)
    assert split_key(key) == [None if p is None else str(p) for p in parts]
    assert canonical_key(key) == key  # never shaped like the NULL key
