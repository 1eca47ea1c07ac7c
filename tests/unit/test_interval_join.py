"""Flink's ``IntervalJoinOperatorTest``, ported case by case (the Flink test's name in each
test's), on the interval join's co-process function in the keyed process runtime over RocksDB.
Each case runs with the left input ahead of the right and the other way round, as Flink's
``lhsFasterThanRhs`` parameter does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.join_reference import MIN_TIME, Arrival
from tests.support.join_support import JoinDriver
from weir.engine.joins.interval import IntervalJoinFunction, PairContext
from weir.state.rocksdb import RocksState


class FlinkHarness:
    """Flink's ``KeyedTwoInputStreamOperatorTestHarness`` for one key: elements of each input
    arrive under the minimum of both inputs' watermarks."""

    def __init__(self, fn: IntervalJoinFunction, path: Path) -> None:
        self.driver = JoinDriver(fn, RocksState(path / "db"))
        self.wm = {"left": MIN_TIME, "right": MIN_TIME}

    def element(self, side: str, ts: int) -> FlinkHarness:
        rec = {"ts": ts, "side": "lhs" if side == "left" else "rhs"}
        self.driver.feed([Arrival(side, "key", ts, min(self.wm.values()), rec)])
        return self

    def watermark(self, side: str, ts: int) -> FlinkHarness:
        self.wm[side] = ts
        self.driver.advance(min(self.wm.values()))
        return self

    def elements_and_watermarks(self, lo: int, hi: int, lhs_faster: bool) -> FlinkHarness:
        for side in ("left", "right") if lhs_faster else ("right", "left"):
            for t in range(lo, hi + 1):
                self.element(side, t).watermark(side, t)
        return self

    def pairs(self) -> Counter[tuple[int, int]]:
        return Counter((r["left"]["ts"], r["right"]["ts"]) for r in self.driver.out.results)

    def buffer_timestamps(self, side: str) -> list[int]:
        return sorted({ts for ts, _ in self.driver.buffer("key", side)})


def harness(path: Path, lo: int, lo_incl: bool, hi: int, hi_incl: bool) -> FlinkHarness:
    fn = IntervalJoinFunction(lo, hi, lower_inclusive=lo_incl, upper_inclusive=hi_incl)
    return FlinkHarness(fn, path)


LHS_FASTER = pytest.mark.parametrize("lhs_faster", [True, False], ids=["lhs-faster", "rhs-faster"])


@LHS_FASTER
def test_flink_testImplementationMirrorsCorrectly(tmp_path: Path, lhs_faster: bool) -> None:
    h = harness(tmp_path / "a", 1, True, 3, False).elements_and_watermarks(1, 4, lhs_faster)
    assert h.pairs() == Counter([(1, 2), (1, 3), (2, 3), (2, 4), (3, 4)])
    m = harness(tmp_path / "b", -3, False, -1, True).elements_and_watermarks(1, 4, lhs_faster)
    assert m.pairs() == Counter([(2, 1), (3, 1), (3, 2), (4, 2), (4, 3)])
    assert not h.driver.out.late and not m.driver.out.late


CASES = {
    # Flink test name: (lower, lower inclusive, upper, upper inclusive, expected (lhs, rhs))
    "testNegativeInclusiveAndNegativeInclusive": (
        -2, True, -1, True, [(2, 1), (3, 1), (3, 2), (4, 2), (4, 3)],
    ),
    "testNegativeInclusiveAndPositiveInclusive": (
        -1, True, 1, True,
        [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3), (3, 4), (4, 3), (4, 4)],
    ),
    "testPositiveInclusiveAndPositiveInclusive": (
        1, True, 2, True, [(1, 2), (1, 3), (2, 3), (2, 4), (3, 4)],
    ),
    "testNegativeExclusiveAndNegativeExlusive": (-3, False, -1, False, [(3, 1), (4, 2)]),
    "testNegativeExclusiveAndPositiveExlusive": (
        -1, False, 1, False, [(1, 1), (2, 2), (3, 3), (4, 4)],
    ),
    "testPositiveExclusiveAndPositiveExlusive": (1, False, 3, False, [(1, 3), (2, 4)]),
}  # fmt: skip


@LHS_FASTER
@pytest.mark.parametrize("flink_test", sorted(CASES))
def test_flink_bounds(tmp_path: Path, flink_test: str, lhs_faster: bool) -> None:
    lo, lo_incl, hi, hi_incl, expected = CASES[flink_test]
    h = harness(tmp_path, lo, lo_incl, hi, hi_incl).elements_and_watermarks(1, 4, lhs_faster)
    assert h.pairs() == Counter(expected)
    assert not h.driver.out.late


CLEANUP = {
    # Flink test name: (bounds, left/right buffers at watermarks 1, 4)
    "testStateCleanupNegativeInclusiveNegativeInclusive": (
        (-1, True, 0, True), ([2, 3, 4, 5], [1, 2, 3, 4, 5]), ([5], [4, 5]),
    ),
    "testStateCleanupNegativePositiveNegativeExlusive": (
        (-2, False, 1, False), ([2, 3, 4, 5], [1, 2, 3, 4, 5]), ([5], [4, 5]),
    ),
    "testStateCleanupPositiveInclusivePositiveInclusive": (
        (0, True, 1, True), ([1, 2, 3, 4, 5], [2, 3, 4, 5]), ([4, 5], [5]),
    ),
    "testStateCleanupPositiveExlusivePositiveExclusive": (
        (-1, False, 2, False), ([1, 2, 3, 4, 5], [2, 3, 4, 5]), ([4, 5], [5]),
    ),
}  # fmt: skip


@pytest.mark.parametrize("flink_test", sorted(CLEANUP))
def test_flink_state_cleanup(tmp_path: Path, flink_test: str) -> None:
    (lo, lo_incl, hi, hi_incl), at1, at4 = CLEANUP[flink_test]
    h = harness(tmp_path, lo, lo_incl, hi, hi_incl)
    for side in ("left", "right"):
        for t in range(1, 6):
            h.element(side, t)
    h.watermark("left", 1).watermark("right", 1)
    assert (h.buffer_timestamps("left"), h.buffer_timestamps("right")) == at1
    h.watermark("left", 4).watermark("right", 4)
    assert (h.buffer_timestamps("left"), h.buffer_timestamps("right")) == at4
    h.watermark("left", 6).watermark("right", 6)
    assert h.driver.buffer("key", "left") == [] and h.driver.buffer("key", "right") == []
    assert h.driver.rt.snapshot().puts == {}  # the key left nothing in RocksDB


def test_flink_testRestoreFromSnapshot(tmp_path: Path) -> None:
    h = harness(tmp_path, -1, True, 1, True)
    for t in (1, 2, 3):
        h.element("left", t).watermark("left", t).element("right", t).watermark("right", t)
    assert h.pairs() == Counter([(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3)])
    before = len(h.driver.out.results)
    h.driver.restart()  # a new runtime, its state restored from RocksDB
    h.element("left", 4).watermark("left", 4).element("right", 4).watermark("right", 4)
    after = Counter((r["left"]["ts"], r["right"]["ts"]) for r in h.driver.out.results[before:])
    assert after == Counter([(3, 4), (4, 3), (4, 4)])
    assert not h.driver.out.late


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int, int, int]] = []

    def __call__(self, left: Any, right: Any, ctx: PairContext) -> None:
        self.seen.append(
            (left["ts"], right["ts"], ctx.left_timestamp, ctx.right_timestamp, ctx.timestamp)
        )
        ctx.emit({"l": left["ts"], "r": right["ts"], "key": ctx.key})


def test_flink_testContextCorrectLeftTimestamp_RightTimestamp_ReturnsCorrectTimestamp(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    fn = IntervalJoinFunction(-1, 1, fn=rec)
    h = FlinkHarness(fn, tmp_path).elements_and_watermarks(1, 4, True)
    assert len(rec.seen) == 10
    for lt, rt, ctx_l, ctx_r, ctx_t in rec.seen:
        assert (ctx_l, ctx_r, ctx_t) == (lt, rt, max(lt, rt))
    assert h.driver.out.results[0]["key"] == "key"


def test_flink_testDiscardsLateData(tmp_path: Path) -> None:
    h = harness(tmp_path, -1, True, 1, True)
    for t in (1, 2, 3):
        h.element("left", t).element("right", t)
    h.watermark("left", 3).watermark("right", 3)
    h.element("left", 1)  # late: it must not join again
    for t in (4, 5):
        h.element("left", t).element("right", t)
    assert h.pairs() == Counter(
        [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 3), (3, 4), (4, 3), (4, 4),
         (4, 5), (5, 4), (5, 5)]
    )  # fmt: skip


def test_flink_testLateData(tmp_path: Path) -> None:
    """Flink side-outputs late records when given tags; weir always does, to ``late``."""
    h = harness(tmp_path, -1, True, 1, True)
    h.element("left", 3).element("right", 3).watermark("left", 3).watermark("right", 3)
    h.element("left", 4).element("right", 4)
    h.element("left", 1).element("right", 2)  # both late
    h.element("left", 5).element("right", 5)
    assert h.pairs() == Counter([(3, 3), (3, 4), (4, 3), (4, 4), (4, 5), (5, 4), (5, 5)])
    assert h.driver.out.late == [
        {"side": "left", "key": "key", "ts": 1, "watermark": 3,
         "record": {"ts": 1, "side": "lhs"}},
        {"side": "right", "key": "key", "ts": 2, "watermark": 3,
         "record": {"ts": 2, "side": "rhs"}},
    ]  # fmt: skip


def test_a_record_at_the_watermark_is_not_late_but_finds_what_cleanup_left(
    tmp_path: Path,
) -> None:
    """Flink's ``isLate`` is ``ts < watermark``, and a buffer entry goes when the watermark
    reaches its cleanup time: a record exactly at the watermark is kept and joins what is still
    buffered, not what was cleaned at that watermark (outside any source bound, see
    ``weir.engine.joins.interval``)."""
    h = harness(tmp_path, 0, True, 1, True)
    h.element("left", 2).element("left", 3).watermark("left", 3).watermark("right", 3)
    h.element("right", 3)  # left 2 was cleaned at 2 + 1 <= 3; left 3 (cleanup 4) joins
    assert h.pairs() == Counter([(3, 3)])
    assert not h.driver.out.late


def test_cleanup_times_near_the_end_of_time_are_clamped(tmp_path: Path) -> None:
    top = (1 << 63) - 1
    h = harness(tmp_path, -5, True, 10, True)
    h.element("left", top - 2).element("right", top)
    assert h.pairs() == Counter([(top - 2, top)])
    h.watermark("left", top).watermark("right", top)
    assert h.driver.buffer("key", "left") == [] and h.driver.buffer("key", "right") == []


@pytest.mark.parametrize(
    ("bounds", "first", "second"),
    [((-40, 0), "right", "left"), ((0, 40), "left", "right")],
    ids=["right-entry-expired", "left-entry-expired"],
)
def test_an_entry_past_its_cleanup_time_joins_nothing_before_its_timer_fires(
    tmp_path: Path, bounds: tuple[int, int], first: str, second: str
) -> None:
    """Cleanup timers round up to 1/16 of the width (here 2 ms): an entry whose cleanup time
    (9 + 40 = 49) the watermark reached is skipped although its timer (50) has not fired, as
    Flink's per-record timer would have removed it; the buffer still shows it meanwhile."""
    h = harness(tmp_path, bounds[0], True, bounds[1], True)
    h.element(first, 9).watermark("left", 49).watermark("right", 49)
    assert h.buffer_timestamps(first) == [9]
    h.element(second, 49)  # at the watermark: not late, 40 ms from the entry
    assert h.pairs() == Counter() and not h.driver.out.late
    h.watermark("left", 50).watermark("right", 50)
    assert h.buffer_timestamps(first) == []


def test_a_join_function_that_raises_goes_to_the_dead_letters_and_the_record_is_cleaned(
    tmp_path: Path,
) -> None:
    def broken(left: Any, right: Any, ctx: PairContext) -> None:
        raise ValueError("no")

    h = FlinkHarness(IntervalJoinFunction(0, 1, fn=broken), tmp_path)
    h.element("left", 1).element("right", 2)
    assert h.driver.out.dead[0]["stage"] == "process:joined"
    assert h.buffer_timestamps("right") == [2]  # buffered, with its cleanup timer
    h.watermark("left", 5).watermark("right", 5)
    assert h.buffer_timestamps("right") == [] and h.buffer_timestamps("left") == []
