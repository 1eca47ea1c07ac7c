"""At one watermark jump, windows fire and become final in the order of their timers, as in
Flink's timer service: window [0, 50) with 30 ms of allowed lateness is final at 79, before
window [50, 100) fires at 99, so its final emission comes first (weir emitted [50, 100) first
when the end of input passed both at once)."""

from __future__ import annotations

import pytest

from weir import Job, WatermarkStrategy, agg, sources, testing, windows


def _job() -> Job:
    job = Job("order")
    (
        job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
                   watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
        .key_by("id")
        .window(windows.tumbling(ms=50), allowed_lateness_ms=30)
        .aggregate("n", n=agg.count())
    )  # fmt: skip
    return job


@pytest.mark.parametrize("batch", [1, 2, 4])
@pytest.mark.parametrize("columnar", ["off", "auto"])
def test_a_final_emission_precedes_a_later_windows_firing_at_one_jump(
    batch: int, columnar: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_COLUMNAR", columnar)
    events = [{"id": "a", "ts": t} for t in (0, 14, 28, 50)]
    out = testing.run(_job(), events, batch_size=batch)
    got = [(r["start"], r["n"], r["final"]) for r in out.results]
    assert got == [(0, 3, False), (0, 3, True), (50, 1, True)]


def test_windows_final_at_one_jump_come_in_time_order_among_firings() -> None:
    """Windows awaiting their final emission and due ones, passed by one watermark."""
    job = Job("order3")
    (
        job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
                   watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
        .key_by("id")
        .window(windows.tumbling(ms=10), allowed_lateness_ms=25)
        .aggregate("n", n=agg.count())
    )  # fmt: skip
    events = [{"id": "a", "ts": t} for t in (1, 11, 21, 31, 41)]
    out = testing.run(job, events, batch_size=1)
    ends = [(r["end"], r["final"]) for r in out.results]
    # watermark t - 1 after each record: a window fires (not final: 25 ms of lateness) when
    # the next one's record arrives; [0, 10) is final at 34, before [30, 40) fires at 39; at
    # the end, finals at end - 1 + 25 and the last firing (at 49) interleave by time
    assert ends == [
        (10, False), (20, False), (30, False), (10, True), (40, False),
        (20, True), (50, True), (30, True), (40, True),
    ]  # fmt: skip


def _late_job(assigner: windows.WindowAssigner) -> Job:
    job = Job("allowed")
    (
        job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
                   watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
        .key_by("id")
        .window(assigner, allowed_lateness_ms=30)
        .aggregate("n", n=agg.count())
    )  # fmt: skip
    return job


@pytest.mark.parametrize("columnar", ["off", "auto"])
def test_a_late_but_allowed_record_updates_its_window_before_later_timers_fire(
    columnar: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0 arrives under watermark 66: [0, 50) fired, within its lateness: updated at once, as
    Flink does per record. Then 102 moves the watermark to 101: [0, 50) is final at 79, [50,
    100) fires at 99. In one batch weir once applied the update after both."""
    monkeypatch.setenv("WEIR_COLUMNAR", columnar)
    events = [{"id": "a", "ts": t} for t in (67, 0, 102)]
    out = testing.run(_late_job(windows.tumbling(ms=50)), events, batch_size=3)
    got = [(r["start"], r["n"], r["final"]) for r in out.results]
    assert got == [(0, 1, False), (0, 1, True), (50, 1, False), (50, 1, True), (100, 1, True)]


@pytest.mark.parametrize("batch", [1, 2])
def test_sliding_windows_interleave_firings_finals_and_updates_by_time(batch: int) -> None:
    """111 arrives under 149: it updates [75, 125) then [100, 150) (earliest first), both
    fired; at the end [75, 125) is final at 154, before [125, 175) fires at 174 and [100, 150)
    is final at 179 (weir once emitted the finals after every firing)."""
    events = [{"id": "a", "ts": t} for t in (150, 111)]
    out = testing.run(_late_job(windows.sliding(size_ms=50, slide_ms=25)), events,
                      batch_size=batch)  # fmt: skip
    got = [(r["start"], r["n"], r["final"]) for r in out.results]
    assert got == [
        (75, 1, False), (100, 1, False), (75, 1, True), (125, 1, True), (100, 1, True),
        (150, 1, True),
    ]  # fmt: skip
