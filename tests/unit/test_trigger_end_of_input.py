"""A continuous event-time trigger at the end of the input (issue 41, items 7 and 8): one
watermark jump that passes a window's next continuous firing and its end fires the window once
(Flink fires it twice, with the same contents), so the final watermark emits each global window
once and each session window final once, at every parallelism."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, agg, sources, testing, triggers, windows

# the records of Flink's WindowOperatorTest.testContinuousWatermarkTrigger, in its order
FLINK_CONTINUOUS = [
    {"id": k, "ts": t, "v": 1}
    for k, t in [("key1", 0), ("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 999),
                 ("key2", 1998), ("key2", 1999), ("key2", 1000)]
]  # fmt: skip


def _job(window: windows.WindowAssigner, interval_ms: int, purging: bool = False) -> Job:
    trigger: triggers.Trigger = triggers.continuous_event_time(interval_ms)
    if purging:
        trigger = triggers.purging(trigger)
    job = Job("cont")
    (
        job.source(sources.jsonl("/unused.jsonl"), timestamp="ts", watermarks=WatermarkStrategy())
        .key_by("id")
        .window(window)
        .trigger(trigger)
        .aggregate("c", n=agg.count(), total=agg.sum("v"))
    )
    return job


def _by_key(results: list[dict[str, Any]]) -> dict[str, list[tuple[int, bool]]]:
    out: dict[str, list[tuple[int, bool]]] = {}
    for r in results:
        out.setdefault(r["key"], []).append((r["n"], r["final"]))
    return out


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_a_global_window_fires_once_at_the_end_of_input(parallelism: int) -> None:
    """key1's timer at 3 000 fires under the watermark 3 998 with its one record; the final
    watermark then passes key1's next firing (6 000) and its end together: one firing with its
    three records. key2's first firing would be at 6 000: only the end's."""
    got = testing.run(
        _job(windows.global_windows(), 3_000), FLINK_CONTINUOUS, parallelism=parallelism
    )
    assert _by_key(got.results) == {"key1": [(1, False), (3, False)], "key2": [(5, False)]}


@pytest.mark.parametrize("purging", [False, True])
@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_each_session_is_final_once_under_a_continuous_trigger(
    parallelism: int, purging: bool
) -> None:
    events = [
        {"id": k, "ts": t, "v": 1}
        for k, t in [("a", 10), ("a", 400), ("b", 20), ("a", 250), ("b", 2_000), ("a", 1_000),
                     ("a", 1_300), ("b", 2_450), ("a", 5_000)]
    ]  # fmt: skip
    job = _job(windows.session(gap_ms=500), 300, purging)
    got = testing.run(job, events, parallelism=parallelism)
    finals = Counter((r["key"], r["start"], r["end"]) for r in got.results if r["final"])
    assert finals and set(finals.values()) == {1}
    one = testing.run(_job(windows.session(gap_ms=500), 300, purging), events)
    assert sorted(map(repr, got.results)) == sorted(map(repr, one.results))
