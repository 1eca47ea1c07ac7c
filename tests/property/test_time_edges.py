"""Batching invariance at both edges of the signed 64-bit event-time range: the events of
``test_batching`` moved next to ``-2**63`` or ``2**63 - 1`` (clamped into the range, so some
land exactly on it), through tumbling, sliding, session and cumulate windows (offsets
included), against the brute-force model."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import PHASES, cuts, events
from tests.support.inprocess import run_batches
from tests.support.reference import (
    MAX_TIME,
    MIN_TIME,
    Spec,
    canonical,
    group_emissions,
    simulate_decoded,
)
from weir import windows

EDGES = settings(max_examples=60, phases=PHASES)


@st.composite
def edge_events(draw: st.DrawFn) -> list[Any]:
    """Events within a few hundred ms of one edge (``ts`` clamped into the range)."""
    base = draw(st.sampled_from([MIN_TIME + 300, MAX_TIME - 700, MAX_TIME - 200]))
    out = []
    for e in draw(events()):
        if isinstance(e, dict) and type(e.get("ts")) in (int, float):
            t = int(e["ts"]) + base
            t = min(max(t, MIN_TIME), MAX_TIME)
            e = {**e, "ts": float(t) if type(e["ts"]) is float else t}
        out.append(e)
    return out


@st.composite
def edge_specs(draw: st.DrawFn) -> Spec:
    kind = draw(st.sampled_from(["tumbling", "sliding", "session", "cumulate"]))
    bound = draw(st.sampled_from([0, 1, 10, 40]))
    lateness = draw(st.sampled_from([0, 5, 30, 150, 1 << 62]))
    if kind == "session":
        return Spec(bound=bound, size=1, gap=draw(st.sampled_from([1, 20, 60])), lateness=lateness)
    if kind == "cumulate":
        size, step = draw(st.sampled_from([(12, 4), (10, 10), (100, 25)]))
        return Spec(bound=bound, size=size, step=step, lateness=lateness)
    size, slide = draw(st.sampled_from([(10, 5), (12, 8), (25, 1), (100, 25), (7, None)]))
    if kind == "tumbling":
        slide = None
    offset = draw(st.integers(-(slide or size) + 1, (slide or size) - 1))
    return Spec(bound=bound, size=size, slide=slide, lateness=lateness, offset=offset)


@EDGES
@given(data=st.data(), spec=edge_specs())
def test_any_batching_at_the_edges_of_time_matches_reference(
    data: st.DataObject, spec: Spec
) -> None:
    evs = data.draw(edge_events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, flush_after=flushes)
    ref = simulate_decoded(evs, spec)
    assert group_emissions(run.results) == ref.emissions
    assert canonical(run.late) == canonical(ref.late)
    assert canonical(run.dead) == canonical(ref.dead)
    for r in run.results:  # a session of records at MAX_TIME alone is [MAX_TIME, MAX_TIME]
        assert MIN_TIME <= r["start"] <= r["end"] <= MAX_TIME
        assert r["start"] < r["end"] or r["start"] == MAX_TIME


@given(
    ts=st.lists(
        st.one_of(
            st.integers(-10_000, 10_000),
            st.integers(MAX_TIME - 300, MAX_TIME),
            st.integers(MIN_TIME, MIN_TIME + 300),
        ),
        min_size=1,
    ),
    shape=st.sampled_from([(10, 4, 1), (10, 5, 0), (12, 8, -3), (7, 7, 0), (100, 25, -24)]),
)
def test_sliding_batch_forms_agree_with_the_windows_of_each_timestamp(
    ts: list[int], shape: tuple[int, int, int]
) -> None:
    """The operator's batch forms (first window end, pane end) against ``window_ends_of``."""
    size, slide, offset = shape
    sw = windows.sliding(size_ms=size, slide_ms=slide, offset_ms=offset)
    assert sw.first_ends_after(ts) == [min(sw.window_ends_of(t)) for t in ts]
    assert sw.first_ends_after(ts) == [sw.first_end_at_or_after(t + 1) for t in ts]
    for t, p in zip(ts, sw.pane_ends(ts), strict=True):
        assert p == sw.pane_end(t) and p in sw.panes_of(sw.window_ends_of(t)[0])
