"""A named session case against the brute-force model: a late record that bridges two fired
sessions merges them (the batching properties are in test_batching.py)."""

from __future__ import annotations

from pathlib import Path

from tests.property.test_batching import _assert_matches
from tests.support.inprocess import run_batches
from tests.support.reference import Spec, simulate_decoded


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
        {"op": "imps", "key": "k", "start": 0, "end": 10, "count": 1, "total": 1, "lo": 1,
         "hi": 1, "avg": 1.0, "final": False}
    ]  # fmt: skip
    assert ref.late == []
    run = run_batches(evs, spec, [1, 1, 1, 1])
    _assert_matches(run, ref)
