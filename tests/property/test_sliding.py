"""Sliding-window assignment by definition (the batching properties against the model are in
test_batching.py, parametrised over window kinds)."""

from __future__ import annotations

import pytest
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


def test_slide_longer_than_size_is_refused() -> None:
    with pytest.raises(ValueError, match="slide 20 ms is longer than the size 10 ms"):
        windows.sliding(size_ms=10, slide_ms=20)
