"""The window join's co-process function in the keyed process runtime over RocksDB: Flink's
``CoGroupJoinITCase`` join cases ported (the Flink test's name in each test's), then weir's
rules: windows fire at ``end - 1``, sessions merge across both sides by Flink's touching rule,
late records go to the ``late`` side output, and fired windows leave no state."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.join_reference import MIN_TIME, Arrival
from tests.support.join_support import JoinDriver
from weir import Job, WatermarkStrategy, sources, testing
from weir.engine import windows
from weir.engine.joins.window import WindowJoinFunction
from weir.state.rocksdb import RocksState

# CoGroupJoinITCase's two sources: (key, name, ts), each with the watermark ts - 1 after a record
FLINK_LEFT = [("a", "x", 0), ("a", "y", 1), ("a", "z", 2), ("b", "u", 3), ("b", "w", 5),
              ("a", "i", 6), ("a", "j", 7), ("a", "k", 8)]  # fmt: skip
FLINK_RIGHT = [("a", "u", 0), ("a", "w", 1), ("b", "i", 3), ("b", "k", 5), ("a", "x", 6),
               ("a", "z", 8)]  # fmt: skip


def flink_tuple(left: Any, right: Any) -> str:
    """Flink's ``first + ":" + second`` for two Tuple3s."""
    return "({},{},{}):({},{},{})".format(*left, *right)


def feed_two_sources(
    driver: JoinDriver, left: list[tuple[str, str, int]], right: list[tuple[str, str, int]],
    order: str,
) -> None:  # fmt: skip
    """Both sources through the driver, each record under the minimum of the two sources'
    watermarks (``ts - 1`` of each source's last record), interleaved as ``order`` says."""
    wm = {"left": MIN_TIME, "right": MIN_TIME}
    queues = {"left": list(left), "right": list(right)}
    pattern = {"left-first": "L" * 99, "right-first": "R" * 99, "round-robin": "LR" * 99}[order]
    for turn in pattern:
        side = "left" if turn == "L" else "right"
        if not queues[side]:
            side = "right" if side == "left" else "left"
        if not queues[side]:
            break
        rec = queues[side].pop(0)
        driver.feed([Arrival(side, rec[0], rec[2], min(wm.values()), list(rec))])
        wm[side] = rec[2] - 1
        driver.advance(min(wm.values()))
    driver.advance((1 << 63) - 1)


ORDERS = pytest.mark.parametrize("order", ["left-first", "right-first", "round-robin"])


@ORDERS
def test_flink_CoGroupJoinITCase_testJoin(tmp_path: Path, order: str) -> None:
    fn = WindowJoinFunction(windows.tumbling(ms=3), flink_tuple)
    d = JoinDriver(fn, RocksState(tmp_path / "db"))
    feed_two_sources(d, FLINK_LEFT, FLINK_RIGHT, order)
    assert sorted(d.out.results) == sorted(
        ["(a,x,0):(a,u,0)", "(a,x,0):(a,w,1)", "(a,y,1):(a,u,0)", "(a,y,1):(a,w,1)",
         "(a,z,2):(a,u,0)", "(a,z,2):(a,w,1)", "(b,u,3):(b,i,3)", "(b,u,3):(b,k,5)",
         "(b,w,5):(b,i,3)", "(b,w,5):(b,k,5)", "(a,i,6):(a,x,6)", "(a,i,6):(a,z,8)",
         "(a,j,7):(a,x,6)", "(a,j,7):(a,z,8)", "(a,k,8):(a,x,6)", "(a,k,8):(a,z,8)"]
    )  # fmt: skip
    assert not d.out.late and not d.out.dead


def test_flink_CoGroupJoinITCase_testSelfJoin(tmp_path: Path) -> None:
    """``source1.join(source1)``: every record reaches both inputs."""
    fn = WindowJoinFunction(windows.tumbling(ms=3), flink_tuple)
    d = JoinDriver(fn, RocksState(tmp_path / "db"))
    feed_two_sources(d, FLINK_LEFT, FLINK_LEFT, "round-robin")
    groups = [FLINK_LEFT[0:3], FLINK_LEFT[3:5], FLINK_LEFT[5:8]]
    expected = [flink_tuple(a, b) for g in groups for a in g for b in g]
    assert sorted(d.out.results) == sorted(expected) and len(expected) == 22


def arrivals(*items: tuple[str, int, int], key: str = "k") -> list[Arrival]:
    """``(side, ts, watermark)`` items, each record ``{"side", "ts"}``."""
    return [Arrival(side, key, ts, wm, {"side": side[0], "ts": ts}) for side, ts, wm in items]


def run(fn: WindowJoinFunction, items: list[Arrival], path: Path) -> JoinDriver:
    d = JoinDriver(fn, RocksState(path / "db"))
    for a in items:
        d.feed([a])
    return d


def pairs(d: JoinDriver) -> Counter[tuple[int, int, int, int]]:
    return Counter((r["start"], r["end"], r["left"]["ts"], r["right"]["ts"]) for r in d.out.results)


def test_default_record_and_firing_at_end_minus_one(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.tumbling(ms=10), None)
    d = run(fn, arrivals(("left", 1, MIN_TIME), ("right", 9, MIN_TIME)), tmp_path)
    d.advance(8)
    assert d.out.results == []  # the window [0, 10) fires when the watermark reaches 9
    d.advance(9)
    assert d.out.results == [
        {"key": "k", "start": 0, "end": 10, "left": {"side": "l", "ts": 1},
         "right": {"side": "r", "ts": 9}}
    ]  # fmt: skip
    assert d.buffer("k", "left") == [] and d.buffer("k", "right") == []
    assert d.rt.snapshot().puts == {}  # nothing left in RocksDB for the key


def test_a_function_returning_none_emits_nothing(tmp_path: Path) -> None:
    fn = WindowJoinFunction(
        windows.tumbling(ms=10), lambda a, b: None if b["ts"] == 2 else (a["ts"], b["ts"])
    )
    d = run(fn, arrivals(("left", 1, 0), ("right", 2, 0), ("right", 3, 0)), tmp_path)
    d.advance(9)
    assert d.out.results == [(1, 3)]


def test_sliding_windows_pair_records_in_every_window_both_are_in(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.sliding(size_ms=10, slide_ms=5), None)
    d = run(fn, arrivals(("left", 7, 0), ("right", 12, 0), ("right", 3, 0)), tmp_path)
    d.advance((1 << 63) - 1)
    assert pairs(d) == Counter([(5, 15, 7, 12), (0, 10, 7, 3)])


def test_a_sliding_record_late_for_some_windows_joins_the_others(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.sliding(size_ms=10, slide_ms=5), None)
    # right 7 arrives after [0, 10) fired (watermark 9): it still joins [5, 15)
    d = run(fn, arrivals(("left", 6, 0), ("right", 7, 9)), tmp_path)
    d.advance((1 << 63) - 1)
    assert pairs(d) == Counter([(5, 15, 6, 7)])
    assert not d.out.late


def test_a_record_late_for_every_window_goes_to_the_late_output(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.tumbling(ms=10), None)
    d = run(fn, arrivals(("left", 5, 0), ("right", 7, 8), ("right", 6, 9)), tmp_path)
    d.advance((1 << 63) - 1)
    assert pairs(d) == Counter([(0, 10, 5, 7)])
    assert d.out.late == [
        {"side": "right", "key": "k", "ts": 6, "watermark": 9, "record": {"side": "r", "ts": 6}}
    ]


def test_sessions_touching_across_sides_merge(tmp_path: Path) -> None:
    """Flink's ``TimeWindow.intersects``: a left record at 0 and a right one exactly one gap
    later share the session ``[0, 10)``."""
    fn = WindowJoinFunction(windows.session(gap_ms=5), None)
    d = run(fn, arrivals(("left", 0, 0), ("right", 5, 0), ("right", 11, 0)), tmp_path)
    d.advance((1 << 63) - 1)
    assert pairs(d) == Counter([(0, 10, 0, 5)])


def test_a_record_between_two_sessions_bridges_them(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.session(gap_ms=5), None)
    d = run(fn, arrivals(("left", 0, 0), ("left", 10, 0), ("right", 5, 0)), tmp_path)
    assert d.buffer("k", "sessions") == [[0, 15]]
    d.advance(13)
    assert d.out.results == []  # the old timers (4, 14) moved to the merged session's 14
    d.advance(14)
    assert pairs(d) == Counter([(0, 15, 0, 5), (0, 15, 10, 5)])
    assert d.rt.snapshot().puts == {}


def test_a_session_record_is_late_only_when_its_merged_session_is(tmp_path: Path) -> None:
    fn = WindowJoinFunction(windows.session(gap_ms=5), None)
    # at watermark 6 the record at 1 ([1, 6)) would be late alone, but joins the open [3, 8)
    d = run(fn, arrivals(("left", 3, 0), ("right", 1, 6), ("right", 0, 7)), tmp_path)
    d.advance((1 << 63) - 1)
    assert pairs(d) == Counter([(1, 8, 3, 1)])
    assert [x["ts"] for x in d.out.late] == [0]  # [0, 5) touches nothing open at 7


def test_a_dynamic_gap_that_is_not_a_positive_integer_goes_to_the_dead_letters(
    tmp_path: Path,
) -> None:
    fn = WindowJoinFunction(windows.dynamic_session(lambda r: r["ts"] - 1), None)
    d = run(fn, arrivals(("left", 1, 0), ("right", 3, 0)), tmp_path)
    assert d.out.dead and "session gap 0 is not a positive integer" in d.out.dead[0]["reason"]
    assert d.buffer("k", "left") == [] and len(d.buffer("k", "right")) == 1


def test_the_last_window_of_time_holds_max_time(tmp_path: Path) -> None:
    top = (1 << 63) - 1
    fn = WindowJoinFunction(windows.tumbling(ms=10), None)
    d = run(fn, arrivals(("left", top, 0), ("right", top - 1, 0)), tmp_path)
    d.advance(top)
    assert [(r["end"], r["left"]["ts"]) for r in d.out.results] == [(top, top)]


@pytest.mark.parametrize("offset", [0, 3, -4])
def test_a_tumbling_records_window_is_the_assigners(offset: int) -> None:
    assigner = windows.tumbling(ms=10, offset_ms=offset)
    fn = WindowJoinFunction(assigner, None)
    top = (1 << 63) - 1
    for t in [-(1 << 63), -11, -1, 0, 2, 3, 9, 13, 10**15 + 7, top - 9, top - 1, top]:
        assert fn._ends(t) == assigner.window_ends([t]), t


def test_a_join_function_that_raises_goes_to_the_dead_letters_and_the_window_is_cleaned(
    tmp_path: Path,
) -> None:
    fn = WindowJoinFunction(windows.tumbling(ms=10), lambda a, b: a["missing"])
    d = run(fn, arrivals(("left", 1, 0), ("right", 2, 0)), tmp_path)
    d.advance(9)
    assert d.out.results == [] and d.out.dead[0]["stage"] == "timer:joined"
    assert "KeyError: 'missing'" in d.out.dead[0]["reason"]
    assert d.rt.snapshot().puts == {} and d.buffer("k", "left") == []


def test_weir_testing_collects_a_joins_late_records_as_its_late_side_output() -> None:
    job = Job("j")
    s = job.source(sources.jsonl("/x"), watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
    left = s.filter(lambda e: e["side"] == "a")
    right = s.filter(lambda e: e["side"] == "b")
    left.join(right).where("id").equal_to("id").window(windows.tumbling(ms=10)).apply(name="w")
    events = [
        {"side": "a", "id": "k", "ts": 1},
        {"side": "b", "id": "k", "ts": 2},
        {"side": "a", "id": "k", "ts": 50},
        {"side": "b", "id": "k", "ts": 3},  # behind the watermark 49: late for [0, 10)
    ]
    result = testing.run(job, events, batch_size=1)
    assert [(r["left"]["ts"], r["right"]["ts"]) for r in result.by_operator["w"]] == [(1, 2)]
    late = result.side["w"]["late"]
    assert [(r["side"], r["ts"], r["watermark"]) for r in late] == [("right", 3, 49)]
