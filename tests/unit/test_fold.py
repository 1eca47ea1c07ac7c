"""The generated batch fold against a record-at-a-time fold through each aggregate's ``merge``:
every aggregate shape (no field, one field, two fields, a user-defined one), batches whose
records share one window and batches that span several."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support import Distinct
from weir import agg
from weir.engine.agg import Aggregate
from weir.engine.runtime.stored.fold import FoldPlan

SHAPES: dict[str, dict[str, Aggregate]] = {
    "count": {"n": agg.count()},
    "count_sum": {"n": agg.count(), "total": agg.sum("value")},
    "two_fields": {"lo": agg.min("value"), "hi": agg.max("w"), "avg": agg.mean("value")},
    "user_defined": {"ids": agg.custom(Distinct()), "n": agg.count()},
    # SQL's: NULLs (None, or no field) skipped; count(field) counts the non-NULL values
    "sql_nulls": {
        "n": agg.count(),
        "nv": agg.count("value"),
        "total": agg.sum("value", nulls="skip"),
        "lo": agg.min("w", nulls="skip"),
        "hi": agg.max("value", nulls="skip"),
        "avg": agg.avg("value"),
        "mean": agg.mean("w", nulls="skip"),
        "time": agg.window_time(),
        "cast": agg.cast(agg.avg("w"), "int"),
    },
}
NULLABLE = {"sql_nulls"}


def _rec(rng: random.Random, shape: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"value": rng.randint(-9, 9), "w": rng.random()}
    if shape in NULLABLE:
        for f in ("value", "w"):
            roll = rng.random()
            if roll < 0.3:
                rec[f] = None
            elif roll < 0.4:
                del rec[f]
    return rec


def _slots_of_one(plan: FoldPlan, rec: dict[str, Any]) -> list[Any]:
    buckets: dict[int, dict[str, list[Any]]] = {}
    cols = plan.columns([rec])
    assert cols is not None
    plan.fold(buckets, {}, ["k"], [0], *cols, [rec])
    return buckets[0]["k"]


def _naive(plan: FoldPlan, keys: list[str], ends: list[int], recs: list[Any]) -> dict[int, Any]:
    out: dict[int, dict[str, list[Any]]] = {}
    for k, e, r in zip(keys, ends, recs, strict=True):
        one = _slots_of_one(plan, r)
        have = out.setdefault(e, {}).get(k)
        out[e][k] = one if have is None else plan.merge(have, one)
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("ends_per_batch", [1, 3])
def test_fold_equals_record_at_a_time(shape: str, ends_per_batch: int) -> None:
    rng = random.Random(f"{shape}{ends_per_batch}")
    plan = FoldPlan(SHAPES[shape])
    buckets: dict[int, dict[str, list[Any]]] = {}
    dirty: dict[int, set[str]] = {}
    all_keys: list[str] = []
    all_ends: list[int] = []
    all_recs: list[Any] = []
    for _ in range(20):
        n = rng.randint(1, 30)
        keys = [f"k{rng.randint(0, 9)}" for _ in range(n)]
        ends = sorted(rng.choice([10, 20, 30][:ends_per_batch]) for _ in range(n))
        recs = [_rec(rng, shape) for _ in keys]
        cols = plan.columns(recs)
        assert cols is not None
        plan.fold(buckets, dirty, keys, ends, *cols, recs)
        all_keys += keys
        all_ends += ends
        all_recs += recs
    assert buckets == _naive(plan, all_keys, all_ends, all_recs)
    assert {e: set(b) for e, b in buckets.items()} == dirty


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_column_is_what_result_reports(shape: str) -> None:
    plan = FoldPlan(SHAPES[shape])
    buckets: dict[int, dict[str, list[Any]]] = {}
    recs = [{"value": v, "w": v / 3} for v in range(-5, 20)]
    keys = [f"k{v % 4}" for v in range(-5, 20)]
    cols = plan.columns(recs)
    assert cols is not None
    plan.fold(buckets, {}, keys, [10] * len(keys), *cols, recs)
    slots = list(buckets[10].values())
    for name in plan.ranked:  # what a top-N reads (not window_time: the same for every key)
        want = [plan.result(k, 0, 10, s, False)[name] for k, s in buckets[10].items()]
        assert plan.column(name, slots) == want


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_merge_bucket_equals_one_merge_per_key_and_leaves_the_panes_alone(shape: str) -> None:
    rng = random.Random(shape)
    plan = FoldPlan(SHAPES[shape])
    panes: dict[int, dict[str, list[Any]]] = {}
    for _ in range(60):
        rec = _rec(rng, shape)
        cols = plan.columns([rec])
        assert cols is not None
        plan.fold(panes, {}, [f"k{rng.randint(0, 9)}"], [rng.choice([10, 20, 30])], *cols, [rec])
    before = {p: _results(plan, p, b) for p, b in panes.items()}
    merged: dict[str, list[Any]] = {}
    for p in sorted(panes):
        plan.merge_bucket(merged, panes[p])
    expected: dict[str, list[Any]] = {}
    for p in sorted(panes):
        for k, s in panes[p].items():
            expected[k] = s if k not in expected else plan.merge(expected[k], s)
    assert merged == expected
    for slots in merged.values():  # a composed window changed in place after composing ...
        plan.merge_into(slots, plan.copy(slots))
    for p, b in panes.items():  # ... leaves its panes' accumulators as they were
        assert _results(plan, p, b) == before[p]


def _results(plan: FoldPlan, end: int, bucket: dict[str, list[Any]]) -> dict[str, Any]:
    return {k: plan.result(k, 0, end, s, False) for k, s in bucket.items()}


def test_sql_slots_pass_over_nulls_and_an_all_null_aggregate_is_null() -> None:
    plan = FoldPlan(SHAPES["sql_nulls"])
    recs = [{"value": None, "w": None}, {}, {"value": 4, "w": 0.5}, {"value": 3}]
    buckets: dict[int, dict[str, list[Any]]] = {}
    cols = plan.columns(recs)
    assert cols is not None
    plan.fold(buckets, {}, ["a", "a", "b", "b"], [10] * 4, *cols, recs)
    a, b = (plan.result(k, 0, 10, buckets[10][k], True) for k in ("a", "b"))
    assert {k: a[k] for k in SHAPES["sql_nulls"]} == {
        "n": 2, "nv": 0, "total": None, "lo": None, "hi": None, "avg": None, "mean": None,
        "time": 9, "cast": None,
    }  # fmt: skip
    assert {k: b[k] for k in SHAPES["sql_nulls"]} == {
        "n": 2, "nv": 2, "total": 7, "lo": 0.5, "hi": 4, "avg": 3, "mean": 0.5, "time": 9,
        "cast": 0,
    }  # fmt: skip


def test_a_null_where_an_aggregate_rejects_nulls_names_the_way_to_skip_them() -> None:
    plan = FoldPlan({"total": agg.sum("value"), "avg": agg.avg("value")})
    assert plan.columns([{"value": None}]) is None
    kind, why = plan.bad_field({"value": None}) or ("", "")
    assert kind == "null" and "field 'value' is NULL" in why and "nulls='skip'" in why
    assert plan.bad_field({"value": "x"}) == (
        "not-a-number",
        "field 'value' is str 'x', not a number",
    )
