"""Flink's ``WindowOperatorTest`` cases for merging (session) windows under a trigger or an
evictor, ported as named tests (the Flink test name in each): the same records, watermarks and
processing times, the same sessions and sums, with the snapshot and restore in the middle where
Flink's test has one. The operator is the real triggered one over the in-memory state backend
(``tests/unit/test_flink_triggers.py``'s harness); weir adds the final emission of each session
emitted ``final: false``, at its cleanup time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.unit.test_flink_triggers import Harness, _query
from weir import Job, WatermarkStrategy, agg, evictors, sources, triggers, windows
from weir.base.errors import JobDefinitionError
from weir.engine.watermarks import MAX_WATERMARK

Row = tuple[str, int, int, int, bool]


def _rows(h: Harness) -> list[Row]:
    """What was emitted since the last call, as ``(key, start, end, sum, final)``."""
    rows = [(r["key"], r["start"], r["end"], r["sum"], r["final"]) for r in h.output]
    h.output = []
    return rows


def test_flink_window_operator_test_session_windows_with_count_trigger(tmp_path: Path) -> None:
    """WindowOperatorTest#testSessionWindowsWithCountTrigger: sessions of gap 3 s,
    PurgingTrigger.of(CountTrigger.of(4)). A record that merges two sessions of 3 records each
    sums their counts (Flink's CountTrigger.onMerge): 7 >= 4, so the merged session fires."""
    h = Harness(tmp_path, windows.session(gap_ms=3000), triggers.purging(triggers.count(4)))
    for value, ts in [(1, 0), (2, 1000), (3, 2500), (4, 3500)]:
        h.process_element("key2", value, ts)
    h.process_element("key1", 1, 10)
    h.process_element("key1", 2, 1000)
    h.snapshot_and_restore()
    h.process_element("key1", 3, 2500)
    for value, ts in [(1, 6000), (2, 6500), (3, 7000)]:
        h.process_element("key1", value, ts)
    assert _rows(h) == [("key2", 0, 6500, 10, False)]  # Flink's "key2-10", 0L, 6500L
    h.process_element("key1", 10, 4500)  # bridges (10, 5500) and (6000, 10000)
    assert _rows(h) == [("key1", 10, 10000, 22, False)]  # Flink's "key1-22", 10L, 10000L
    h.process_watermark(MAX_WATERMARK)  # weir: each purged session's final emission
    assert sorted(_rows(h)) == [("key1", 10, 10000, 22, True), ("key2", 0, 6500, 10, True)]


def test_flink_window_operator_test_session_windows_with_continuous_event_time_trigger(
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testSessionWindowsWithContinuousEventTimeTrigger: sessions of gap
    3 s, ContinuousEventTimeTrigger.of(2 s). A merged session keeps the earliest next firing of
    its parts (Flink merges it with Min), and it survives a snapshot and restore."""
    h = Harness(tmp_path, windows.session(gap_ms=3000), triggers.continuous_event_time(2000))
    h.process_element("key1", 1, 1500)
    h.process_element("key2", 1, 0)
    h.process_element("key2", 3, 2500)
    h.process_element("key2", 2, 1000)
    h.process_watermark(2500)  # fires at 2000; the next firing is 4000
    assert sorted(_rows(h)) == [("key1", 1500, 4500, 1, False), ("key2", 0, 5500, 6, False)]
    h.process_element("key2", 5, 4000)
    h.process_watermark(3000)
    assert _rows(h) == []
    h.snapshot_and_restore()
    h.process_element("key1", 2, 4000)
    h.process_element("key2", 4, 3500)
    h.process_watermark(4000)
    assert sorted(_rows(h)) == [("key1", 1500, 7000, 3, False), ("key2", 0, 7000, 15, False)]


def test_flink_window_operator_test_point_sessions(tmp_path: Path) -> None:
    """WindowOperatorTest#testPointSessions: records whose value is 33 get a "point" window;
    Flink's assigner makes it ``[t, t)``, weir's dynamic gap must be positive, so 1 ms. Either
    touches the session around it and merges into it."""
    gap = windows.dynamic_session(lambda e: 1 if e["v"] == 33 else 3000)
    h = Harness(tmp_path, gap, triggers.event_time())
    h.process_element("key2", 1, 0)
    h.process_element("key2", 33, 1000)
    h.snapshot_and_restore()
    h.process_element("key2", 33, 2500)
    h.process_element("key1", 1, 10)
    h.process_element("key1", 2, 1000)
    h.process_element("key1", 33, 2500)
    h.process_watermark(12000)
    # Flink's "key1-36", 10L, 4000L and "key2-67", 0L, 3000L; final: lateness 0 has passed
    assert sorted(_rows(h)) == [("key1", 10, 4000, 36, True), ("key2", 0, 3000, 67, True)]


def test_flink_window_operator_test_processing_time_session_windows(tmp_path: Path) -> None:
    """WindowOperatorTest#testProcessingTimeSessionWindows: processing-time sessions of gap 3 s
    with ProcessingTimeTrigger on an injected clock (the records' timestamps are ignored)."""
    h = Harness(tmp_path, windows.session(gap_ms=3000, time="processing"),
                triggers.processing_time())  # fmt: skip
    h.set_processing_time(3)
    h.process_element("key2", 1, 1)
    h.set_processing_time(1000)
    h.process_element("key2", 1, 1002)
    h.set_processing_time(5000)
    assert _rows(h) == [("key2", 3, 4000, 2, True)]  # Flink's ("key2", 2) at 3999
    for key in ("key2", "key2", "key1", "key1", "key1"):
        h.process_element(key, 1, 5000)
    h.set_processing_time(10000)
    assert sorted(_rows(h)) == [("key1", 5000, 8000, 3, True), ("key2", 5000, 8000, 2, True)]


def _lateness_steps(h: Harness, tail: list[int]) -> list[list[Row]]:
    """The records and watermarks of Flink's testDropDueToLatenessSession*PurgingTrigger cases,
    up to the watermark 14600, then ``tail``'s records; the rows emitted after each step."""
    steps: list[list[Row]] = []
    h.process_element("key2", 1, 1000)
    h.process_watermark(1999)
    h.process_element("key2", 1, 2000)
    h.process_watermark(4998)
    h.process_element("key2", 1, 4500)  # joins a session whose max timestamp is ahead
    h.process_element("key2", 1, 8500)  # a new session
    h.process_watermark(7400)
    h.process_element("key2", 1, 7000)  # merges the two sessions into one
    h.process_watermark(11501)
    steps.append(_rows(h))
    h.process_element("key2", 1, 11600)  # a new session
    h.process_watermark(14600)
    steps.append(_rows(h))
    for ts in tail:
        h.process_element("key2", 1, ts)
        steps.append(_rows(h))
    h.process_element("key2", 1, 14500)
    h.process_watermark(20000)
    steps.append(_rows(h))
    h.process_watermark(100000)
    steps.append(_rows(h))
    return steps


def test_flink_window_operator_test_side_output_due_to_lateness_session_zero_lateness_purging_trigger(  # noqa: E501
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testSideOutputDueToLatenessSessionZeroLatenessPurgingTrigger
    (formerly testDropDueToLatenessSessionZeroLatenessPurgingTrigger): PurgingTrigger.of(
    EventTimeTrigger), lateness 0. 10000 and 10100 would only join sessions already cleaned
    up: late, and not merged with each other."""
    h = Harness(tmp_path, windows.session(gap_ms=3000),
                triggers.purging(triggers.event_time()))  # fmt: skip
    assert _lateness_steps(h, [10000, 10100]) == [
        [("key2", 1000, 11500, 5, True)],  # Flink's "key2-5", 1000L, 11500L
        [("key2", 11600, 14600, 1, True)],  # Flink's "key2-1", 11600L, 14600L
        [],
        [],
        [("key2", 14500, 17500, 1, True)],  # Flink's "key2-1", 14500L, 17500L
        [],
    ]
    assert h.late_records() == [10000, 10100]


def test_flink_window_operator_test_drop_due_to_lateness_session_with_lateness_purging_trigger(
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testDropDueToLatenessSessionWithLatenessPurgingTrigger: as above with
    10 ms of lateness. 10000 merges into (11600, 14600), already fired and purged: the merged
    session fires at once with just that record, and 14500 extends it to (10000, 17500). weir
    adds the final emissions: (1000, 11500) at its cleanup time with what it last fired with,
    and the merged session's own final firing pays what its parts owed."""
    h = Harness(tmp_path, windows.session(gap_ms=3000),
                triggers.purging(triggers.event_time()), lateness=10)  # fmt: skip
    assert _lateness_steps(h, [10000]) == [
        [("key2", 1000, 11500, 5, False)],
        [("key2", 1000, 11500, 5, True), ("key2", 11600, 14600, 1, False)],  # by time
        [("key2", 10000, 14600, 1, False)],  # Flink's "key2-1", 10000L, 14600L
        [("key2", 10000, 17500, 1, True)],  # Flink's "key2-1", 10000L, 17500L
        [],
    ]
    assert h.late_records() == []


def test_session_windows_with_a_count_evictor_aggregate_the_union_of_the_merged_sessions(
    tmp_path: Path,
) -> None:
    """Flink's testMergeAndEvictor checked that a merging assigner refused an evictor; Flink's
    EvictingWindowOperator has since run evictors on merging windows, and so does weir: the
    merged session holds the union of its parts' records, by time, then the new record, and a
    count evictor keeps the last of those."""
    h = Harness(tmp_path, windows.session(gap_ms=100), triggers.event_time(),
                evictors.count(3))  # fmt: skip
    for value, ts in [(1, 0), (2, 50), (4, 250), (8, 300)]:
        h.process_element("k", value, ts)
    h.snapshot_and_restore()
    assert [w[:2] for w in _query(h, "k")] == [(0, 150), (250, 400)]
    h.process_element("k", 16, 150)  # (150, 250) touches (0, 150) and (250, 400)
    held = _query(h, "k")
    assert [w[:2] for w in held] == [(0, 400)]
    assert held[0][2] == [4 + 8 + 16]  # of 1, 2, 4, 8, 16 the last three
    h.process_watermark(MAX_WATERMARK)
    assert _rows(h) == [("k", 0, 400, 28, True)]


class _Unmergeable(triggers.CountTrigger):
    """A trigger whose state cannot merge (Flink: ``canMerge()`` returns false)."""

    can_merge: ClassVar[bool] = False


def _windowed(assigner: windows.WindowAssigner) -> Any:
    job = Job("refuse")
    stream = job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
    return stream.key_by("k").window(assigner)


def test_a_trigger_that_cannot_merge_is_refused_on_session_windows_naming_it() -> None:
    """Flink fails a job whose trigger cannot merge on a merging assigner; weir refuses it when
    the job is defined, naming the trigger and the fix. On a tumbling window it is fine."""
    with pytest.raises(JobDefinitionError, match=r"trigger\(count\(3\)\) cannot merge.*session"):
        _windowed(windows.session(gap_ms=100)).trigger(_Unmergeable(3))
    _windowed(windows.tumbling(ms=100)).trigger(_Unmergeable(3)).aggregate("n", n=agg.count())


def test_every_builtin_trigger_merges_and_runs_on_sessions() -> None:
    """What the session windows take: every trigger of ``weir.triggers`` (``never`` too) and an
    evictor, each shown by ``weir explain``'s description; cumulate windows still take none."""
    made = [triggers.event_time(), triggers.processing_time(), triggers.count(2),
            triggers.continuous_event_time(10), triggers.continuous_processing_time(10),
            triggers.purging(triggers.count(2)), triggers.never()]  # fmt: skip
    for i, trigger in enumerate(made):
        assert triggers.can_merge(trigger)
        stream = _windowed(windows.dynamic_session(lambda e: 5)).trigger(trigger)
        result = stream.evictor(evictors.time(10)).aggregate(f"s{i}", n=agg.count())
        described = result.operator.describe()
        assert described["trigger"] == trigger.describe()
        assert described["evictor"] == evictors.time(10).describe()
    with pytest.raises(JobDefinitionError, match=r"on cumulate windows is not supported"):
        _windowed(windows.cumulate(100, 10)).trigger(triggers.count(2))
