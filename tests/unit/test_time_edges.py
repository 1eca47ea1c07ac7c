"""The whole signed 64-bit event-time range (Flink's ``long``), at both edges: timestamps near
``-2**63`` and ``2**63 - 1`` are accepted, every derived time stays in the range (a window end
past it is ``MAX_TIME``, a start before it ``MIN_TIME``, a cleanup time past it ``MAX_TIME``,
Flink's ``TimeWindow.cleanupTime``), and those beyond the range go to the dead letters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.inprocess import run_batches
from tests.support.reference import Spec, group_emissions, simulate_decoded
from weir import Job, WatermarkStrategy, sources, testing, windows
from weir.base.errors import StateError
from weir.engine.watermarks import per_record_watermarks
from weir.engine.windows import MAX_TIME, MIN_TIME, cleanup_time, is_late
from weir.state import layout
from weir.state.rocksdb import RocksState

MAX, MIN = MAX_TIME, MIN_TIME
SPECS = {
    "tumbling": Spec(bound=3, size=10, lateness=6),
    "tumbling-offset": Spec(bound=3, size=10, lateness=6, offset=-4),
    "sliding": Spec(bound=3, size=10, slide=4, lateness=6),
    "sliding-offset": Spec(bound=3, size=12, slide=8, lateness=6, offset=3),
    "session": Spec(bound=3, size=1, gap=10, lateness=6),
    "cumulate": Spec(bound=3, size=12, step=4, lateness=6),
}


def _ev(t: int, key: str = "k", value: int = 1) -> dict[str, Any]:
    return {"id": key, "event": "impression", "ts": t, "value": value}


def _edge_events(base: int, sign: int) -> list[dict[str, Any]]:
    """Records within 30 ms of an edge, out of order, one of them late."""
    offsets = [0, 1, 2, 9, 5, 11, 20, 13, 29, 3, 28, 0]
    return [_ev(base + sign * o, "ab"[i % 2], i) for i, o in enumerate(offsets)]


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("batch", [1, 4, 100], ids=["one-by-one", "fours", "one-batch"])
def test_windows_at_the_upper_edge_match_the_reference(name: str, batch: int) -> None:
    spec = SPECS[name]
    evs = _edge_events(MAX, -1)
    run = run_batches(evs, spec, [batch] * len(evs))
    ref = simulate_decoded(evs, spec)
    assert group_emissions(run.results) == ref.emissions
    assert run.dead == [] and len(run.late) == len(ref.late)
    assert max(r["end"] for r in run.results) == MAX  # the last window saturates
    assert all(MIN <= r["start"] < r["end"] <= MAX for r in run.results)
    holding_max = [r for r in run.results if r["end"] == MAX]
    assert holding_max and all(r["final"] for r in holding_max[-1:])


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("batch", [1, 4, 100], ids=["one-by-one", "fours", "one-batch"])
def test_windows_at_the_lower_edge_match_the_reference(name: str, batch: int) -> None:
    spec = SPECS[name]
    evs = _edge_events(MIN, 1)
    run = run_batches(evs, spec, [batch] * len(evs))
    ref = simulate_decoded(evs, spec)
    assert group_emissions(run.results) == ref.emissions
    assert run.dead == []
    assert min(r["start"] for r in run.results) == MIN  # the first window starts with time
    assert all(MIN <= r["start"] < r["end"] <= MAX for r in run.results)


def test_the_saturated_last_window_holds_max_and_fires_like_any_other() -> None:
    """Tumbling 10: the window that would end past 2**63 - 1 ends there and also holds the
    instant 2**63 - 1; it fires at end - 1 like any window, and its cleanup time clamps, so
    the final watermark still emits it final (without the clamp it never would)."""
    spec = Spec(bound=0, size=10, lateness=1_000)
    last_start = MAX - 1 - (MAX - 1) % 10
    run = run_batches([_ev(MAX - 1), _ev(MAX), _ev(MAX)], spec, [1, 1, 1])
    rows = [(r["start"], r["end"], r["count"], r["final"]) for r in run.results]
    # the first MAX fires the window (watermark MAX - 1 = end - 1); the second is within the
    # allowed lateness, an update; the end of the input makes it final
    assert rows == [
        (last_start, MAX, 2, False),
        (last_start, MAX, 3, False),
        (last_start, MAX, 3, True),
    ]
    assert cleanup_time(MAX, 1_000) == MAX and is_late(MAX, 1_000, MAX)
    assert not is_late(MAX, 1_000, MAX - 1)


@pytest.mark.parametrize(
    "t", [MAX + 1, MIN - 1, 1 << 64], ids=["max-plus-one", "min-minus-one", "two-to-64"]
)
def test_a_timestamp_outside_the_64_bit_range_goes_to_the_dead_letters(t: int) -> None:
    run = run_batches([_ev(t), _ev(5)], SPECS["tumbling"], [2])
    assert [d["stage"] for d in run.dead] == ["timestamp"]
    assert [r["count"] for r in run.results] == [1]
    job = Job("edge")
    job.source(sources.jsonl("/unused.jsonl")).key_by("id").process(lambda e, c: None, name="p")
    out = testing.run(job, [_ev(t)])
    assert "outside the signed 64-bit range" in out.dead[0]["reason"]


def test_watermarks_clamp_at_the_start_of_time() -> None:
    wms, new_max = per_record_watermarks([MIN, MIN + 3, MIN + 100], MIN, 10)
    assert wms == [MIN, MIN, MIN] and new_max == MIN + 100
    wms, _ = per_record_watermarks([MIN + 200], new_max, 10)
    assert wms == [MIN + 89]
    strategy = WatermarkStrategy.bounded_out_of_orderness(ms=5)
    assert strategy.watermark_for(MIN + 2) == MIN
    assert strategy.watermark_for(MAX) == MAX - 6


def test_state_keys_hold_both_edges_and_refuse_beyond() -> None:
    for ns in (MIN, MIN + 1, 0, MAX - 1, MAX):
        key = layout.state_key(3, 7, b"k", ns)
        assert layout.decode_state_key(key) == (3, 7, b"k", ns)
    assert layout.encode_namespace(MIN) < layout.encode_namespace(MAX)
    prefix = layout.state_prefix(3, 7)
    assert layout.namespace_upper_bound(prefix, MAX) > prefix + layout.encode_namespace(MAX)
    with pytest.raises(StateError, match=r"namespace 9223372036854775808 is outside"):
        layout.encode_namespace(MAX + 1)


def test_windows_ending_at_max_are_purged_from_rocksdb(tmp_path: Path) -> None:
    """Retention purges by a range of cleanup timers up to the window end; the end 2**63 - 1 has
    no successor to bound that range with. (With no retention, the data watermark 2**63 - 2
    makes the window ending at 2**63 - 1 due.)"""
    spec = Spec(bound=0, size=10, lateness=0)
    db = RocksState(tmp_path / "db")
    try:
        run = run_batches([_ev(MAX - 3), _ev(MAX)], spec, [1, 1], retention_ms=0, state=db)
        rows = [k for k, _ in db.scan(b"", b"\xff" * 8)]
    finally:
        db.close()
    assert [r["end"] for r in run.results] == [MAX]
    assert rows == [], "the window and its cleanup timer are purged"


class _Timers:
    def process(self, event: dict[str, Any], ctx: Any) -> None:
        ctx.register_event_time_timer(event["at"])

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit({"key": ctx.key, "timer": timestamp, "watermark": ctx.watermark})


def _timer_job() -> Job:
    job = Job("timers")
    job.source(
        sources.jsonl("/unused.jsonl"), watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0)
    ).key_by("id").process(_Timers(), name="t")
    return job


def test_process_function_timers_at_both_edges() -> None:
    """A timer at -2**63 fires under the first watermark (it has passed already); one at
    2**63 - 1 only at the end of the input, under the final watermark; one beyond the range
    sends its record to the dead letters."""
    evs = [
        {"id": "lo", "ts": MIN, "at": MIN},
        {"id": "hi", "ts": MIN + 1, "at": MAX},
        {"id": "no", "ts": MIN + 2, "at": MAX + 1},
        {"id": "lo", "ts": MIN + 3, "at": MIN + 1},
    ]
    out = testing.run(_timer_job(), evs)
    assert out.results == [
        {"key": "lo", "timer": MIN, "watermark": MIN},
        {"key": "lo", "timer": MIN + 1, "watermark": MIN + 2},
        {"key": "hi", "timer": MAX, "watermark": MAX},
    ]
    assert [d["stage"] for d in out.dead] == ["process:t"]
    assert (
        "timer time 9223372036854775808 is outside the signed 64-bit range"
        in (out.dead[0]["reason"])
    )


def test_sliding_windows_past_the_end_of_time_collapse_into_one() -> None:
    """Size 10, slide 4: the windows that would end at or past 2**63 - 1 are one window from the
    earliest of their starts; a record counts in it once."""
    sw = windows.sliding(size_ms=10, slide_ms=4)
    ends = sw.window_ends_of(MAX)
    assert ends == [MAX]
    first = MAX - 10 + (0 - (MAX - 10)) % 4
    assert sw.start_of(MAX) == first and (first % 4, first + 10 >= MAX) == (0, True)
    assert sw.window_ends_of(MAX - 11) == [
        MAX - 11 - (MAX - 11) % 4 + 10,
        *sw.window_ends_of(MAX - 11)[1:],
    ]
    assert windows.sliding(size_ms=10, slide_ms=4).start_of(MIN + 2) == MIN
