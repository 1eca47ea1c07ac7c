"""Session windows against the brute-force model (one record at a time, every session fired and
finalized after every record): merging, bridging records (late ones too), lateness judged on the
merged session, the emission sequence of every session, and the late output; any batching."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.inprocess import run_batches
from tests.property.test_batching import BATCHING, _assert_matches, _tmp, cuts, events
from tests.reference import Spec, simulate_decoded


@st.composite
def session_specs(draw: st.DrawFn, *, lateness: st.SearchStrategy[int] | None = None) -> Spec:
    return Spec(
        bound=draw(st.sampled_from([0, 1, 10, 40])),
        size=1,
        gap=draw(st.sampled_from([1, 5, 20, 60])),
        lateness=draw(lateness if lateness is not None else st.sampled_from([0, 5, 30, 150])),
    )


@BATCHING
@given(data=st.data(), spec=session_specs())
def test_sessions_any_batching_match_reference(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, spec: Spec
) -> None:
    evs = data.draw(events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, _tmp(tmp_path_factory), flush_after=flushes)
    _assert_matches(run, simulate_decoded(evs, spec))


@settings(BATCHING, max_examples=40)
@given(data=st.data(), spec=session_specs())
def test_sessions_one_record_per_batch_match_reference(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, spec: Spec
) -> None:
    evs = data.draw(events())
    run = run_batches(evs, spec, [1] * len(evs), _tmp(tmp_path_factory))
    _assert_matches(run, simulate_decoded(evs, spec))


def test_a_late_record_that_bridges_two_sessions_merges_them(tmp_path: Path) -> None:
    """gap 10, bound 0, lateness 100: sessions [0,10) and [15,25) fire when 40 arrives; 9 then
    arrives behind the watermark but bridges both (its window [9,19) overlaps each): one
    session [0, 25) holding three records, emitted as an update, then final at the end."""
    spec = Spec(bound=0, size=1, gap=10, lateness=100)
    evs = [
        {"id": "k", "event": "impression", "ts": t, "value": v}
        for t, v in [(0, 1), (15, 2), (40, 3), (9, 4)]
    ]
    ref = simulate_decoded(evs, spec)
    assert [(e["count"], e["total"], e["final"]) for e in ref.emissions[("k", 0, 25)]] == [
        (3, 7, False),
        (3, 7, True),
    ]
    assert ref.emissions[("k", 0, 10)] == [
        {"key": "k", "start": 0, "end": 10, "count": 1, "total": 1, "lo": 1, "hi": 1,
         "avg": 1.0, "final": False}
    ]  # fmt: skip
    assert ref.late == []
    run = run_batches(evs, spec, [1, 1, 1, 1], tmp_path)
    _assert_matches(run, ref)
