"""Watermark strategies and the per-record watermark each record arrives under."""

from __future__ import annotations

import random
import sys

import pytest

from weir.engine.watermarks import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    VECTOR_MIN,
    WatermarkStrategy,
    _numpy,
    per_record_watermarks,
)


def test_watermark_is_max_minus_bound_minus_one() -> None:
    s = WatermarkStrategy.bounded_out_of_orderness(ms=200)
    assert s.bound_ms == 200
    assert s.watermark_for(1_000) == 799
    assert s.watermark_for(-5) == -206
    assert s.watermark_for(MIN_WATERMARK) == MIN_WATERMARK


def test_monotonous_timestamps_bound_zero() -> None:
    s = WatermarkStrategy.for_monotonous_timestamps()
    assert s.bound_ms == 0
    assert s.watermark_for(10) == 9


def test_with_idleness_keeps_bound() -> None:
    s = WatermarkStrategy.bounded_out_of_orderness(ms=5).with_idleness(1_000)
    assert (s.bound_ms, s.idle_timeout_ms) == (5, 1_000)


def test_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="-1 ms is negative"):
        WatermarkStrategy.bounded_out_of_orderness(ms=-1)


@pytest.mark.parametrize("idle", [0, -3])
def test_non_positive_idle_timeout_is_refused(idle: int) -> None:
    with pytest.raises(ValueError, match=f"idle timeout {idle} ms must be positive"):
        WatermarkStrategy(bound_ms=0, idle_timeout_ms=idle)


def test_per_record_watermarks_first_record_sees_minus_infinity() -> None:
    before, new_max = per_record_watermarks([10, 5, 20, 7], MIN_WATERMARK, 2)
    assert before == [MIN_WATERMARK, 7, 7, 17]
    assert new_max == 20


def test_per_record_watermarks_continue_from_previous_max() -> None:
    before, new_max = per_record_watermarks([5, 40, 41], 30, 0)
    assert before == [29, 29, 39]
    assert new_max == 41


def test_per_record_watermarks_empty_batch() -> None:
    assert per_record_watermarks([], MIN_WATERMARK, 5) == ([], MIN_WATERMARK)
    assert per_record_watermarks([], 100, 5) == ([], 100)


def test_per_record_watermarks_negative_timestamps() -> None:
    before, new_max = per_record_watermarks([-100, -300, -50], MIN_WATERMARK, 10)
    assert before == [MIN_WATERMARK, -111, -111]
    assert new_max == -50


def test_splitting_a_batch_gives_the_same_watermarks() -> None:
    ts = [3, 1, 9, 4, 12, 12, 2, 30, 29]
    whole, end = per_record_watermarks(ts, MIN_WATERMARK, 3)
    first, mid = per_record_watermarks(ts[:4], MIN_WATERMARK, 3)
    second, end2 = per_record_watermarks(ts[4:], mid, 3)
    assert first + second == whole
    assert end2 == end


def test_watermark_constants_are_int64_extremes() -> None:
    assert MIN_WATERMARK == -(2**63)
    assert MAX_WATERMARK == 2**63 - 1


def _brute(ts: list[int], max_seen: int, bound: int) -> tuple[list[int], int]:
    out = []
    for i in range(len(ts)):
        seen = max([max_seen, *ts[:i]])
        out.append(max(seen - bound - 1, MIN_WATERMARK))
    return out, max([max_seen, *ts])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("bound", [0, 1_000, 2**62 - 1, 2**62, 2**70])
def test_large_batches_equal_brute_force_at_the_int64_edges(seed: int, bound: int) -> None:
    rng = random.Random(seed)
    for n in (VECTOR_MIN - 1, VECTOR_MIN, 300):  # each side of the numpy path's threshold
        lo, hi = rng.choice(
            [(-(2**63), -(2**63) + 5_000), (-5_000, 5_000), (2**63 - 5_000, 2**63 - 1)]
        )
        ts = [rng.randint(lo, hi) for _ in range(n)]
        for max_seen in (MIN_WATERMARK, rng.randint(lo, hi)):
            got = per_record_watermarks(ts, max_seen, bound)
            assert got == _brute(ts, max_seen, bound), (n, max_seen)
            assert all(type(w) is int for w in got[0])


def test_without_numpy_large_batches_take_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # numpy comes with the spark extra: a plain install has no numpy to import
    monkeypatch.setitem(sys.modules, "numpy", None)
    _numpy.cache_clear()
    try:
        ts = list(range(VECTOR_MIN * 2, 0, -1))
        assert _numpy() is None
        assert per_record_watermarks(ts, MIN_WATERMARK, 5) == _brute(ts, MIN_WATERMARK, 5)
    finally:
        _numpy.cache_clear()


def test_sqls_delay_is_max_minus_the_delay_the_datastream_bound_one_less() -> None:
    """``WATERMARK FOR ts AS ts - INTERVAL 'd'`` (Flink SQL) is ``max(ts) - d``; the DataStream
    rule, ``bounded_out_of_orderness(d)``, is ``max(ts) - d - 1``."""
    assert WatermarkStrategy.sql_delay(ms=1_000).watermark_for(5_000) == 4_000
    assert WatermarkStrategy.bounded_out_of_orderness(ms=1_000).watermark_for(5_000) == 3_999
    assert WatermarkStrategy.sql_delay(ms=0).watermark_for(5_000) == 5_000  # AS ts
    with pytest.raises(ValueError, match="watermark delay -1 ms is negative"):
        WatermarkStrategy.sql_delay(ms=-1)
