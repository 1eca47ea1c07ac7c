"""Sliding windows against the brute-force model: every record counts in every window holding it
(windows by definition, not the engine's arithmetic), lateness is judged per window, and a
record reaches the late output only when all its windows are late. Any batching, with bad
records, with and without allowed lateness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import windows
from tests.inprocess import run_batches
from tests.property.test_batching import BATCHING, _assert_matches, _tmp, cuts, events
from tests.reference import Spec, simulate_decoded, windows_of

SIZES_SLIDES = st.sampled_from([(10, 5), (12, 5), (30, 10), (100, 25), (7, 7), (25, 1)])


@st.composite
def sliding_specs(draw: st.DrawFn, *, lateness: st.SearchStrategy[int] | None = None) -> Spec:
    size, slide = draw(SIZES_SLIDES)
    return Spec(
        bound=draw(st.sampled_from([0, 1, 10, 40])),
        size=size,
        slide=slide,
        lateness=draw(lateness if lateness is not None else st.sampled_from([0, 5, 30, 150])),
    )


@BATCHING
@given(data=st.data(), spec=sliding_specs())
def test_sliding_any_batching_matches_reference(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, spec: Spec
) -> None:
    evs = data.draw(events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, _tmp(tmp_path_factory), flush_after=flushes)
    _assert_matches(run, simulate_decoded(evs, spec))


@settings(BATCHING, max_examples=40)
@given(data=st.data(), spec=sliding_specs())
def test_sliding_one_record_per_batch_matches_reference(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, spec: Spec
) -> None:
    evs = data.draw(events())
    run = run_batches(evs, spec, [1] * len(evs), _tmp(tmp_path_factory))
    _assert_matches(run, simulate_decoded(evs, spec))


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
