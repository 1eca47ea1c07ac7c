"""Flink's own window-assigner tests, ported as named cases (the Flink test in each name):
``TimeWindowTest``, ``TumblingEventTimeWindowsTest`` and ``SlidingEventTimeWindowsTest`` (their
offset cases) and ``DynamicEventTimeSessionWindowsTest``. Each also runs through the engine and
the brute-force model, so the operators, not only the assigners, follow Flink's start rule."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.inprocess import run_batches
from tests.support.reference import Spec, group_emissions, simulate_decoded, windows_of
from weir import Job, WatermarkStrategy, agg, sources, testing, windows
from weir.engine.windows import Window, window_start_with_offset


def _spans(ws: list[Window]) -> set[tuple[int, int]]:
    return {(w.start, w.end) for w in ws}


# -- TimeWindowTest.testGetWindowStartWithOffset --------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "cases"),
    [
        (0, [(-8, -14), (-7, -7), (-6, -7), (-1, -7), (1, 0), (6, 0), (7, 7), (8, 7)]),
        (
            3,
            [
                (-10, -11),
                (-9, -11),
                (-3, -4),
                (-2, -4),
                (-1, -4),
                (1, -4),
                (2, -4),
                (3, 3),
                (9, 3),
                (10, 10),
            ],
        ),  # fmt: skip
        (
            -2,
            [
                (-12, -16),
                (-7, -9),
                (-4, -9),
                (-3, -9),
                (2, -2),
                (-1, -2),
                (1, -2),
                (-2, -2),
                (3, -2),
                (4, -2),
                (7, 5),
                (12, 12),
            ],
        ),  # fmt: skip
    ],
    ids=["offset-0", "offset-3", "offset-minus-2"],
)
def test_flink_time_window_test_get_window_start_with_offset(
    offset: int, cases: list[tuple[int, int]]
) -> None:
    for t, start in cases:
        assert window_start_with_offset(t, offset, 7) == start, (t, offset)
        assert windows.tumbling(ms=7, offset_ms=offset).assign(t).start == start


def test_flink_time_window_test_get_window_start_with_offset_gmt_plus_8() -> None:
    day, offset = 86_400_000, -8 * 3_600_000
    assert window_start_with_offset(1470902048450, offset, day) == 1470844800000
    w = windows.tumbling(ms=day, offset_ms=offset).assign(1470902048450)
    assert (w.start, w.end) == (1470844800000, 1470844800000 + day)


# -- TumblingEventTimeWindowsTest ------------------------------------------------------------


def test_flink_tumbling_event_time_windows_test_window_assignment_with_global_offset() -> None:
    tw = windows.tumbling(ms=5000, offset_ms=100)
    assert (tw.assign(100).start, tw.assign(100).end) == (100, 5100)
    assert (tw.assign(5099).start, tw.assign(5099).end) == (100, 5100)
    assert (tw.assign(5100).start, tw.assign(5100).end) == (5100, 10100)


def test_flink_tumbling_event_time_windows_test_window_assignment_with_negative_offset() -> None:
    tw = windows.tumbling(ms=5000, offset_ms=-100)
    assert (tw.assign(0).start, tw.assign(0).end) == (-100, 4900)
    assert (tw.assign(4899).start, tw.assign(4899).end) == (-100, 4900)
    assert (tw.assign(4900).start, tw.assign(4900).end) == (4900, 9900)


def test_flink_tumbling_event_time_windows_test_time_units() -> None:
    tw = windows.tumbling(ms=5000, offset_ms=1000)
    assert [tw.assign(t).start for t in (1000, 5999, 6000)] == [1000, 1000, 6000]


@pytest.mark.parametrize("offset", [10_000, 20_000, -11_000, 1.5])
def test_flink_tumbling_event_time_windows_test_invalid_parameters(offset: Any) -> None:
    with pytest.raises(ValueError, match=r"abs\(offset\) < the size \(10000 ms\)"):
        windows.tumbling(ms=10_000, offset_ms=offset)


# -- SlidingEventTimeWindowsTest -------------------------------------------------------------


def test_flink_sliding_event_time_windows_test_window_assignment_with_offset() -> None:
    sw = windows.sliding(size_ms=5000, slide_ms=1000, offset_ms=100)
    assert _spans(sw.assign(100)) == {
        (-3900, 1100), (-2900, 2100), (-1900, 3100), (-900, 4100), (100, 5100)
    }  # fmt: skip
    assert _spans(sw.assign(5099)) == {
        (100, 5100), (1100, 6100), (2100, 7100), (3100, 8100), (4100, 9100)
    }  # fmt: skip
    assert _spans(sw.assign(5100)) == {
        (1100, 6100), (2100, 7100), (3100, 8100), (4100, 9100), (5100, 10100)
    }  # fmt: skip


def test_flink_sliding_event_time_windows_test_window_assignment_with_negative_offset() -> None:
    sw = windows.sliding(size_ms=5000, slide_ms=1000, offset_ms=-100)
    assert _spans(sw.assign(0)) == {
        (-4100, 900), (-3100, 1900), (-2100, 2900), (-1100, 3900), (-100, 4900)
    }  # fmt: skip
    assert _spans(sw.assign(4899)) == {
        (-100, 4900), (900, 5900), (1900, 6900), (2900, 7900), (3900, 8900)
    }  # fmt: skip
    assert _spans(sw.assign(4900)) == {
        (900, 5900), (1900, 6900), (2900, 7900), (3900, 8900), (4900, 9900)
    }  # fmt: skip


def test_flink_sliding_event_time_windows_test_time_units() -> None:
    sw = windows.sliding(size_ms=5000, slide_ms=1000, offset_ms=500)
    assert _spans(sw.assign(100)) == {
        (-4500, 500), (-3500, 1500), (-2500, 2500), (-1500, 3500), (-500, 4500)
    }  # fmt: skip
    later = {(500, 5500), (1500, 6500), (2500, 7500), (3500, 8500), (4500, 9500)}
    assert _spans(sw.assign(5499)) == later
    assert _spans(sw.assign(5100)) == later


@pytest.mark.parametrize("offset", [-11_000, 11_000, 10_000])
def test_flink_sliding_event_time_windows_test_invalid_parameters(offset: int) -> None:
    with pytest.raises(ValueError, match=r"abs\(offset\) < the slide \(10000 ms\)"):
        windows.sliding(size_ms=20_000, slide_ms=10_000, offset_ms=offset)


@pytest.mark.parametrize(
    "spec",
    [
        Spec(bound=30, size=100, lateness=40, offset=-30),
        Spec(bound=30, size=100, slide=25, lateness=40, offset=10),
        Spec(bound=0, size=7, slide=3, lateness=0, offset=-2),
    ],
    ids=["tumbling", "sliding", "sliding-uneven-panes"],
)
@pytest.mark.parametrize("batch", [1, 5, 1000], ids=["one-by-one", "fives", "one-batch"])
def test_offset_windows_through_the_operators_match_the_reference(spec: Spec, batch: int) -> None:
    """Flink's start rule with an offset in the operators (panes included), any batching."""
    evs = [
        {"id": k, "event": "impression", "ts": t, "value": t % 13}
        for t, k in zip(range(-250, 400, 17), "abcab" * 100, strict=False)
    ]
    evs += [{"id": "a", "event": "impression", "ts": -300, "value": 1}]  # late
    run = run_batches(evs, spec, [batch] * len(evs))
    assert group_emissions(run.results) == simulate_decoded(evs, spec).emissions
    starts = {r["start"] for r in run.results}
    step = spec.slide or spec.size
    assert all((s - spec.offset) % step == 0 for s in starts)


def test_describe_shows_an_offset_when_set() -> None:
    assert windows.tumbling(ms=10, offset_ms=-3).describe() == {
        "type": "tumbling", "size_ms": 10, "offset_ms": -3, "time": "event"
    }  # fmt: skip
    assert windows.sliding(size_ms=10, slide_ms=5, offset_ms=2).describe()["offset_ms"] == 2
    assert "offset_ms" not in windows.tumbling(ms=10).describe()


def test_reference_windows_of_follows_flink_offsets() -> None:
    assert windows_of(100, 5000, 1000, 100)[-1] == (100, 5100)
    assert windows_of(0, 5000, None, -100) == [(-100, 4900)]


# -- DynamicEventTimeSessionWindowsTest ------------------------------------------------------


def _session_job(assigner: windows.SessionWindows, lateness: int = 0) -> Job:
    job = Job("dyn")
    job.source(
        sources.jsonl("/unused.jsonl"), watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0)
    ).key_by("id").window(assigner, allowed_lateness_ms=lateness).aggregate("s", count=agg.count())
    return job


def test_flink_dynamic_event_time_session_windows_test_window_assignment() -> None:
    """Each record's window is ``[t, t + gap(record))``: gap5000 at 0, gap4000 at 4999 and
    gap9000 at 5000 are (on their own keys) ``[0, 5000)``, ``[4999, 8999)``, ``[5000, 14000)``."""
    gaps = {"gap5000": 5000, "gap4000": 4000, "gap9000": 9000}
    job = _session_job(windows.dynamic_session(lambda r: gaps[r["id"]]))
    evs = [{"id": "gap5000", "ts": 0}, {"id": "gap4000", "ts": 4999}, {"id": "gap9000", "ts": 5000}]
    out = testing.run(job, evs)
    got = {(r["key"], r["start"], r["end"]) for r in out.results}
    assert got == {("gap5000", 0, 5000), ("gap4000", 4999, 8999), ("gap9000", 5000, 14000)}


def test_flink_dynamic_event_time_session_windows_test_merge_consecutive_windows() -> None:
    """Windows [0,1) [1,2) [2,3) merge into [0,3) and [4,5) [5,6) into [4,6) (they touch)."""
    job = _session_job(windows.session(gap=lambda r: 1))
    evs = [{"id": "k", "ts": t} for t in (0, 1, 2, 4, 5)]
    out = testing.run(job, evs)
    assert [(r["start"], r["end"], r["count"]) for r in out.results] == [(0, 3, 3), (4, 6, 2)]


def test_flink_dynamic_event_time_session_windows_test_merge_covering_window() -> None:
    """A record whose window covers another's absorbs it: [0,2) covers [1,1+1), [4,7) covers
    [5,6), whatever the order the records come in."""
    gaps = {0: 2, 1: 1, 4: 3, 5: 1}
    job = _session_job(windows.dynamic_session(lambda r: gaps[r["ts"]]))
    evs = [{"id": "k", "ts": t} for t in (1, 0, 5, 4)]
    out = testing.run(job, evs).results
    assert [(r["start"], r["end"], r["count"]) for r in out] == [(0, 2, 2), (4, 7, 2)]


@pytest.mark.parametrize(
    ("gap", "reason"),
    [
        (-1, r"session gap -1 is not a positive integer"),
        (0, r"session gap 0 is not a positive integer"),
        (2.5, r"session gap 2\.5 is not a positive integer"),
        ("5", r"session gap '5' is not a positive integer"),
        (None, r"session gap function raised KeyError"),
    ],
)
def test_flink_dynamic_event_time_session_windows_test_invalid_parameters(
    gap: Any, reason: str
) -> None:
    """Flink throws ("0 < gap"); here the record goes to the dead letters with the reason and
    the job goes on."""
    job = _session_job(windows.dynamic_session(lambda r: r["gap"]))
    bad = {"id": "k", "ts": 10} if gap is None else {"id": "k", "ts": 10, "gap": gap}
    out = testing.run(job, [bad, {"id": "k", "ts": 20, "gap": 5}])
    assert [(r["start"], r["end"]) for r in out.results] == [(20, 25)]
    assert [d["stage"] for d in out.dead] == ["gap:s"]
    assert out.dead[0]["input"] == bad
    assert re.search(reason, out.dead[0]["reason"])


def test_a_session_needs_one_gap() -> None:
    with pytest.raises(ValueError, match="session windows need one gap"):
        windows.session()
    with pytest.raises(ValueError, match="session windows need one gap"):
        windows.session(gap_ms=5, gap=lambda r: 5)
    with pytest.raises(ValueError, match=r"gap=3 must be a function of the record"):
        windows.dynamic_session(3)
    assert windows.dynamic_session(len).describe() == {
        "type": "session",
        "gap_ms": "dynamic",
        "time": "event",
    }


@pytest.mark.parametrize("batch", [1, 3, 100], ids=["one-by-one", "threes", "one-batch"])
def test_dynamic_session_gaps_through_the_operator_match_the_reference(batch: int) -> None:
    spec = Spec(bound=20, size=1, gap_field="gap", lateness=15)
    evs: list[Any] = [
        {"id": "ab"[i % 2], "event": "impression", "ts": t, "value": 1, "gap": 1 + (i * 7) % 40}
        for i, t in enumerate([0, 5, 90, 40, 41, 200, 150, 199, 260, 10, 300, 330])
    ]
    evs[3]["gap"] = 0  # a bad gap: dead letters
    run = run_batches(evs, spec, [batch] * len(evs))
    ref = simulate_decoded(evs, spec)
    assert group_emissions(run.results) == ref.emissions
    assert [d["stage"] for d in run.dead] == [d["stage"] for d in ref.dead] == ["gap:imps"]
