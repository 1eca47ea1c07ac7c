"""Every timestamp lands in exactly one tumbling window, and that window holds it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir import windows

TS = st.integers(-(2**53), 2**53)
SIZE = st.one_of(st.integers(1, 10_000), st.sampled_from([1, 1_000, 60_000, 86_400_000]))


@settings(max_examples=300)
@given(TS, SIZE)
def test_one_window_holds_each_timestamp(t: int, size: int) -> None:
    tw = windows.tumbling(ms=size)
    w = tw.assign(t)
    assert w.start <= t < w.end
    assert w.end - w.start == size
    assert w.start % size == 0  # aligned to the epoch
    assert tw.window_ends([t]) == [w.end]
    assert tw.start_of(w.end) == w.start
    # the neighbours do not hold it
    assert not (w.start - size <= t < w.start) and not (w.end <= t < w.end + size)


@settings(max_examples=200)
@given(st.lists(TS, max_size=50), SIZE)
def test_batch_form_matches_single(ts: list[int], size: int) -> None:
    tw = windows.tumbling(ms=size)
    assert tw.window_ends(ts) == [tw.assign(t).end for t in ts]


@settings(max_examples=200)
@given(TS, TS, SIZE)
def test_assignment_is_monotonic(a: int, b: int, size: int) -> None:
    tw = windows.tumbling(ms=size)
    lo, hi = min(a, b), max(a, b)
    assert tw.assign(lo).start <= tw.assign(hi).start
