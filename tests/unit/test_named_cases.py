"""Named cases from the event-time issue, each against the brute-force model and, for purging,
against the RocksDB files themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.inprocess import build_job, run_batches
from tests.support.reference import Spec, group_emissions, simulate_decoded
from weir.engine.runtime.stored import stores_cells
from weir.state import cells
from weir.state.layout import state_prefix
from weir.state.rocksdb import RocksState


def _ev(key: str, t: int, value: int = 1) -> dict[str, object]:
    return {"id": key, "event": "impression", "ts": t, "value": value}


def test_a_watermark_jump_over_several_windows_fires_each_once_in_order(tmp_path: Path) -> None:
    spec = Spec(bound=0, size=100, lateness=0)
    evs = [_ev("a", 5), _ev("b", 150), _ev("a", 250), _ev("c", 399), _ev("a", 1_000)]
    run = run_batches(evs, spec, [len(evs)])
    ref = simulate_decoded(evs, spec)
    assert group_emissions(run.results) == ref.emissions
    fired_by_jump = [(r["key"], r["end"]) for r in run.results if r["end"] <= 400]
    assert fired_by_jump == [("a", 100), ("b", 200), ("a", 300), ("c", 400)]
    assert all(r["final"] for r in run.results)


@pytest.mark.parametrize(
    "spec",
    [
        Spec(bound=0, size=100, lateness=50),
        Spec(bound=0, size=100, slide=25, lateness=50),
        Spec(bound=0, size=1, gap=100, lateness=50),
    ],
    ids=["tumbling", "sliding", "session"],
)
def test_a_key_seen_once_is_purged_on_time(tmp_path: Path, spec: Spec) -> None:
    """Key "once" appears at t=10 and never again; with 200 ms retention its windows and their
    cleanup timers leave RocksDB once the data watermark passes end - 1 + lateness + 200."""
    evs = [_ev("once", 10)] + [_ev("busy", t) for t in range(0, 1_000, 20)]
    db = RocksState(tmp_path / "db")
    try:
        run = run_batches(evs, spec, [7] * 200, retention_ms=200, state=db)
        items = list(db.scan(b"", b"\xff" * 8))
    finally:
        db.close()
    assert any(r["key"] == "once" for r in run.results)
    op = build_job(spec).operators[spec.op]
    sid = state_prefix(0, op.state_id)[2:4]
    stored = [(k, v) for k, v in items if k[2:4] in (sid, state_prefix(0, op.pane_state_id)[2:4])]
    if stores_cells(op):  # the keys are inside the cells: every row of every generation
        window_rows = [key for _, v in stored for key in cells.Cell(v).keys()]
    else:
        window_rows = [k for k, _ in stored]
    assert not any(b"once" in k for k in window_rows), "the key's windows are still stored"
    # and busy windows near the end of the input are still there (retention counts from the
    # last data watermark, 979 - 0 - 1 = 978)
    assert any(b"busy" in k for k in window_rows)
    timer_rows = [k for k, _ in items if k[2:4] == state_prefix(0, op.timer_state_id)[2:4]]
    assert len(timer_rows) <= len(window_rows)


# -- Flink's session rule: windows that touch merge (``TimeWindow.intersects``) ----------------


@pytest.mark.parametrize("batch", [1, 2, 100], ids=["one-by-one", "pairs", "one-batch"])
def test_flink_time_window_intersects_events_one_gap_apart_are_one_session(
    batch: int,
) -> None:
    """Flink's ``TimeWindow.intersects`` (``start <= other.end && end >= other.start``): a record
    exactly one gap after the last one touches its session and joins it; one a millisecond
    later starts a new session."""
    spec = Spec(bound=10_000, size=1, gap=100, lateness=0)
    evs = [_ev("k", 0), _ev("k", 100), _ev("k", 200), _ev("k", 301), _ev("j", 50), _ev("j", -50)]
    run = run_batches(evs, spec, [batch] * len(evs))
    sessions = sorted((r["key"], r["start"], r["end"], r["count"]) for r in run.results)
    assert sessions == [("j", -50, 150, 2), ("k", 0, 300, 3), ("k", 301, 401, 1)]
    assert group_emissions(run.results) == simulate_decoded(evs, spec).emissions


def test_flink_session_bridge_record_merges_two_touching_sessions() -> None:
    """A record that touches two sessions, one on each side, merges all three into one
    (Flink's ``MergingWindowSet``: every window the new one intersects)."""
    spec = Spec(bound=10_000, size=1, gap=100, lateness=0)
    evs = [_ev("k", 0), _ev("k", 200), _ev("k", 100)]  # [0,100) [200,300), then [100,200)
    run = run_batches(evs, spec, [len(evs)])
    assert [(r["start"], r["end"], r["count"]) for r in run.results] == [(0, 300, 3)]
    assert group_emissions(run.results) == simulate_decoded(evs, spec).emissions
