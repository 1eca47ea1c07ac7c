"""Sliding-window assignment by definition (the batching properties against the model are in
test_batching.py, parametrised over window kinds)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.reference import windows_of
from weir import windows


@settings(max_examples=300)
@given(
    t=st.integers(-(10**6), 10**6),
    size_slide=st.tuples(st.integers(1, 500), st.integers(1, 500)).filter(lambda p: p[1] <= p[0]),
)
def test_assigner_gives_exactly_the_windows_holding_t(t: int, size_slide: tuple[int, int]) -> None:
    size, slide = size_slide
    got = sorted((w.start, w.end) for w in windows.sliding(size, slide).assign(t))
    assert got == sorted(windows_of(t, size, slide))
    assert all(w[0] <= t < w[1] and w[0] % slide == 0 for w in got)


@settings(max_examples=300)
@given(
    t=st.integers(-(10**6), 10**6),
    size_slide=st.tuples(st.integers(1, 500), st.integers(1, 500)).filter(lambda p: p[1] > p[0]),
    offset=st.integers(0, 499),
)
def test_a_slide_longer_than_the_size_leaves_gaps_in_no_window(
    t: int, size_slide: tuple[int, int], offset: int
) -> None:
    """Flink's sliding windows with slide > size (its legacy HOP group window): a time in a gap
    between two windows is in none, every other in exactly one."""
    size, slide = size_slide
    assigner = windows.sliding(size, slide, offset_ms=offset % slide)
    got = sorted((w.start, w.end) for w in assigner.assign(t))
    assert got == sorted(windows_of(t, size, slide, offset % slide))
    in_gap = (t - offset % slide) % slide >= size
    assert len(got) == (0 if in_gap else 1)
    assert assigner.expand([t]) == ([w[1] for w in got], [0] * len(got))
