"""Built-in aggregates (merge, result) and user-defined aggregate validation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Distinct
from weir import agg
from weir.engine.agg import Builtin, UserDefined


def test_builtin_kinds_and_fields() -> None:
    assert agg.count() == Builtin("count")
    assert agg.sum("v") == Builtin("sum", "v")
    assert agg.min("v").kind == "min" and agg.max("v").kind == "max"
    assert agg.mean("v").slots == 2 and agg.sum("v").slots == 1


@pytest.mark.parametrize(
    ("a", "left", "right", "merged", "result"),
    [
        (agg.count(), [3], [4], [7], 7),
        (agg.sum("v"), [10], [-4], [6], 6),
        (agg.sum("v"), [1.5], [2], [3.5], 3.5),
        (agg.min("v"), [3], [-2], [-2], -2),
        (agg.max("v"), [3], [-2], [3], 3),
        (agg.mean("v"), [10, 4], [5, 1], [15, 5], 3.0),
        # SQL's: NULLs skipped (None slots until a value), AVG integral over ints
        (agg.sum("v", nulls="skip"), [None], [4], [4], 4),
        (agg.sum("v", nulls="skip"), [None], [None], [None], None),
        (agg.min("v", nulls="skip"), [3], [None], [3], 3),
        (agg.max("v", nulls="skip"), [None], [2.5], [2.5], 2.5),
        (agg.count("v"), [2], [0], [2], 2),
        (agg.avg("v"), [10, 3], [5, 1], [15, 4], 3),
        (agg.avg("v"), [-10, 3], [-5, 1], [-15, 4], -3),
        (agg.avg("v"), [1.5, 1], [0, 0], [1.5, 1], 1.5),
        (agg.avg("v"), [0, 0], [0, 0], [0, 0], None),
        (agg.mean("v", nulls="skip"), [0, 0], [0, 0], [0, 0], None),
        (agg.cast(agg.avg("v"), "float"), [15, 4], [0, 0], [15, 4], 3.0),
        (agg.cast(agg.sum("v", nulls="skip"), "str"), [None], [7], [7], "7"),
        (agg.cast(agg.sum("v", nulls="skip"), "int"), [None], [None], [None], None),
    ],
)
def test_builtin_merge_and_result(
    a: Builtin, left: list[Any], right: list[Any], merged: list[Any], result: Any
) -> None:
    assert a.merge(left, right) == merged
    assert a.result(merged) == result
    assert type(a.result(merged)) is type(result)


def test_sum_keeps_ints_as_ints_and_mean_is_a_float() -> None:
    assert type(agg.sum("v").result([6])) is int
    assert type(agg.mean("v").result([6, 3])) is float


@pytest.mark.parametrize("kind", ["sum", "min", "max", "mean", "avg"])
def test_field_aggregates_need_a_field(kind: str) -> None:
    with pytest.raises(ValueError, match=rf"agg.{kind}\(\) needs a field name"):
        Builtin(kind)  # type: ignore[arg-type]


def test_custom_aggregate_wraps_and_merges() -> None:
    u = agg.custom(Distinct())
    assert isinstance(u, UserDefined) and u.slots == 1
    assert u.merge([[1, 2]], [[2, 3]]) == [[1, 2, 3]]
    assert u.result([[1, 2, 3]]) == 3


def test_as_aggregate_accepts_builtins_wrapped_and_bare_user_defined() -> None:
    c = agg.count()
    assert agg.as_aggregate(c, "n") is c
    assert isinstance(agg.as_aggregate(Distinct(), "d"), UserDefined)


def test_custom_aggregate_missing_methods_are_named() -> None:
    class Half:
        def create(self) -> int:
            return 0

        def add(self, acc: int, record: Any) -> int:
            return acc + 1

    with pytest.raises(TypeError, match="lacks merge, result"):
        agg.custom(Half())  # type: ignore[arg-type]


def test_as_aggregate_refuses_non_aggregates_and_names_the_field() -> None:
    with pytest.raises(TypeError, match="aggregate total=5 is not an aggregate"):
        agg.as_aggregate(5, "total")


def test_window_time_holds_no_slot_and_is_the_end_minus_one() -> None:
    w = agg.window_time()
    assert w.slots == 0 and w.merge([], []) == [] and w.result([], end=5_000) == 4_999


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Builtin("window_time", "v"), "reads no field"),
        (lambda: Builtin("count", "v"), r"counts the non-NULL values: nulls='skip'"),
        (lambda: Builtin("sum", "v", "ignore"), "nulls='ignore'; use 'reject' or 'skip'"),  # type: ignore[arg-type]
        (lambda: Builtin("sum", "v", "skip", "date"), "cast='date'; use one of int, float"),  # type: ignore[arg-type]
    ],
)
def test_builtin_settings_are_checked(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
