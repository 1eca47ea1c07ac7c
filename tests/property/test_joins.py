"""Both joins against the brute-force model (``tests/support/join_reference.py``), on two inputs
interleaved at random, each a split with its own out-of-orderness bound (so some records are
late), at any batching, with restores from the state written in between: the emitted pairs and
the late records equal the model's whatever the batching. Batches reach the co-process runtime
split by input, as a worker delivers them (``tests/support/join_support.py``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from tests.support.join_reference import (
    MIN_TIME,
    Arrival,
    freeze,
    interval_join,
    session_join,
    window_join,
)
from tests.support.join_support import drive
from weir.engine import windows
from weir.engine.joins.interval import IntervalJoinFunction
from weir.engine.joins.window import WindowJoinFunction


@st.composite
def two_inputs(draw: st.DrawFn) -> list[Arrival]:
    """Records of two splits, interleaved; each arrives under the minimum of both splits'
    watermarks (``max ts - bound - 1`` of the records each has sent so far)."""
    bound = draw(st.sampled_from([0, 1, 3, 12]))
    items = draw(
        st.lists(
            st.tuples(st.sampled_from(["left", "right"]), st.sampled_from("ab"),
                      st.integers(0, 4), st.integers(-6, 6)),
            max_size=40,
        )
    )  # fmt: skip
    top = {"left": MIN_TIME, "right": MIN_TIME}
    out: list[Arrival] = []
    clock = 0
    for i, (side, key, step, jitter) in enumerate(items):
        clock += step  # time moves on; a record's own time is jittered around it
        ts = max(clock + jitter, 0)
        wm = min(t - bound - 1 if t > MIN_TIME else MIN_TIME for t in top.values())
        out.append(Arrival(side, key, ts, wm, {"id": i, "side": side[0], "ts": ts}))
        top[side] = max(top[side], ts)
    return out


@st.composite
def near_the_watermark(draw: st.DrawFn) -> list[Arrival]:
    """Records around a watermark that moves on by itself, many exactly at it: the edges of
    lateness and cleanup (a record at the watermark is not late, a buffer entry whose cleanup
    time the watermark reached is gone)."""
    items = draw(
        st.lists(
            st.tuples(st.sampled_from(["left", "right"]), st.sampled_from("ab"),
                      st.integers(0, 3), st.integers(-2, 4)),
            max_size=40,
        )
    )  # fmt: skip
    out: list[Arrival] = []
    wm = 0
    for i, (side, key, step, ahead) in enumerate(items):
        wm += step
        ts = wm + ahead
        out.append(Arrival(side, key, ts, wm, {"id": i, "side": side[0], "ts": ts}))
    return out


INPUTS = st.one_of(two_inputs(), near_the_watermark())


@st.composite
def cuts(draw: st.DrawFn, n: int) -> tuple[list[int], list[bool]]:
    sizes = draw(st.lists(st.integers(1, 9), max_size=n))
    restarts = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
    return sizes, restarts


def late_of(late: list[dict[str, Any]]) -> Counter[Any]:
    return Counter((x["side"], x["ts"], x["watermark"], freeze(x["record"])) for x in late)


def late_ref(arrivals: list[Arrival]) -> Counter[Any]:
    return Counter((a.side, a.ts, a.wm, freeze(a.rec)) for a in arrivals)


WINDOWS = st.sampled_from(
    [("tumbling", 4, None), ("tumbling", 10, None), ("sliding", 8, 2), ("sliding", 9, 3),
     ("session", 2, None), ("session", 5, None)]
)  # fmt: skip


def window_fn(kind: str, size: int, slide: int | None) -> WindowJoinFunction:
    if kind == "session":
        return WindowJoinFunction(windows.session(gap_ms=size), None)
    if kind == "sliding":
        assert slide is not None
        return WindowJoinFunction(windows.sliding(size_ms=size, slide_ms=slide), None)
    return WindowJoinFunction(windows.tumbling(ms=size), None)


@settings(BATCHING, max_examples=120)
@given(data=st.data(), shape=WINDOWS)
def test_window_join_matches_the_reference_at_any_batching(
    data: st.DataObject, shape: tuple[str, int, int | None]
) -> None:
    arrivals = data.draw(INPUTS)
    sizes, restarts = data.draw(cuts(len(arrivals)))
    kind, size, slide = shape
    # sessions merge by arrival order, which a delivery keeps only up to records under one
    # watermark (interleave.py): they run in the given order, the others as a worker delivers
    ordered = kind == "session"
    one = drive(window_fn(*shape), arrivals, [1] * len(arrivals), ordered=ordered)
    cut = drive(window_fn(*shape), arrivals, sizes, restarts, ordered=ordered)
    assert Counter(map(freeze, cut.results)) == Counter(map(freeze, one.results))
    assert late_of(cut.late) == late_of(one.late)
    if kind == "session":
        ref, late = session_join(arrivals, size)
    else:
        ref, late = window_join(arrivals, size, slide)
    got = Counter(
        (r["key"], r["start"], r["end"], freeze(r["left"]), freeze(r["right"])) for r in one.results
    )
    assert got == ref
    assert late_of(one.late) == late_ref(late)
    assert not one.dead


BOUNDS = st.tuples(
    st.integers(-8, 8), st.sampled_from([0, 1, 3, 10, 40, 90]), st.booleans(), st.booleans()
)


@settings(BATCHING, max_examples=120)
@given(data=st.data(), bounds=BOUNDS)
def test_interval_join_matches_the_reference_at_any_batching(
    data: st.DataObject, bounds: tuple[int, int, bool, bool]
) -> None:
    arrivals = data.draw(INPUTS)
    sizes, restarts = data.draw(cuts(len(arrivals)))
    lower, width, lo_incl, hi_incl = bounds

    def fn() -> IntervalJoinFunction:
        return IntervalJoinFunction(
            lower, lower + width, lower_inclusive=lo_incl, upper_inclusive=hi_incl
        )

    one = drive(fn(), arrivals, [1] * len(arrivals))
    cut = drive(fn(), arrivals, sizes, restarts)
    assert Counter(map(freeze, cut.results)) == Counter(map(freeze, one.results))
    assert late_of(cut.late) == late_of(one.late)
    ref, late = interval_join(
        arrivals, lower, lower + width, lower_inclusive=lo_incl, upper_inclusive=hi_incl
    )
    got = Counter((r["key"], freeze(r["left"]), freeze(r["right"]), r["ts"]) for r in one.results)
    assert got == ref
    assert late_of(one.late) == late_ref(late)
