"""The engine's incremental top-K against brute force: random updates that raise and lower
values (so candidates fall behind keys outside them), ties, and window switches."""

from __future__ import annotations

import random
from typing import Any

import pytest

from weir.engine.runtime.operators.topn import CurrentTop, ranked_results
from weir.engine.runtime.stored.ranking import best


def _result(k: str, s: int, e: int, slots: list[Any], f: bool) -> dict[str, Any]:
    return {"up": slots[0], "any": slots[1], "text": "x"}


def _brute(bucket: dict[str, list[Any]], i: int, k: int) -> list[tuple[str, float]]:
    return best(((key, s[i]) for key, s in bucket.items()), k)


def _column(name: str, slots: list[list[Any]]) -> list[Any]:
    return [s[{"up": 0, "any": 1}[name]] for s in slots]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("from_slots", [False, True])
def test_current_top_equals_brute_force(
    seed: int, from_slots: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rank again whenever it must
    monkeypatch.setattr("weir.engine.runtime.operators.topn.RESCAN_S", 0.0)
    rng = random.Random(seed)
    k = 5
    if from_slots:
        tracker = CurrentTop(_result, k=k, names=["up", "any"], column=_column)
    else:
        tracker = CurrentTop(_result, k=k)
    bucket: dict[str, list[Any]] = {}
    end = 1000
    for step in range(300):
        if step == 150:  # the next window opens
            end, bucket = 2000, {}
        changed = set()
        for _ in range(rng.randint(1, 20)):
            key = f"k{rng.randint(0, 60)}"
            slots = bucket.setdefault(key, [0, 0])
            slots[0] += rng.randint(0, 3)  # only grows
            slots[1] += rng.randint(-5, 5)  # grows and shrinks; many ties
            changed.add(key)
        tracker.observe(end, bucket, changed)
        got = tracker.top(bucket)
        assert tracker.end == end
        assert got["up"] == _brute(bucket, 0, k), step
        assert got["any"] == _brute(bucket, 1, k), step
        assert "text" not in got


def test_ranked_results_orders_by_value_then_key() -> None:
    results = [{"key": f"k{i}", "n": i % 3, "label": "a"} for i in range(10)]
    top = ranked_results(results, ["n", "label"], k=4)
    assert top == {"n": [("k2", 2), ("k5", 2), ("k8", 2), ("k1", 1)]}


@pytest.mark.parametrize("seed", range(4))
def test_ranked_results_column_path_equals_pairwise(seed: int) -> None:
    """Columns of finite numbers take the bounded path; the ranking is the pairwise one's,
    ties and mixed ints and floats included, and odd columns still skip what is not a number."""
    rng = random.Random(seed)
    results = [
        {"key": f"k{i:03d}", "n": rng.randint(0, 5), "x": rng.choice([rng.random(), 2, -1.5])}
        for i in range(rng.randint(1, 300))
    ]
    odd = [*results, {"key": "nan", "n": float("nan"), "x": 10**400}]
    for rows in (results, odd):
        top = ranked_results(rows, ["n", "x"], k=7)
        for name in ("n", "x"):
            pairs = [
                (r["key"], r[name])
                for r in rows
                if type(r[name]) in (int, float) and -float("inf") < r[name] < float("inf")
            ]
            assert top[name] == best(pairs, 7)
