"""Flink's ``WindowOperatorTest`` and ``EvictingWindowOperatorTest`` cases for count and global
windows, triggers and evictors, ported as named tests (the Flink test name in each): the same
records, watermarks and processing times, the same results (Flink's ``SumReducer`` is
``agg.sum``), including the snapshot, close and restore in the middle where Flink's test has
one. The operator is the real one (``runtime_for``) over the in-memory state backend,
checkpointed to files and restored into a new instance; its processing-time clock is injected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, agg, evictors, sources, triggers, windows
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.factory import runtime_for
from weir.engine.runtime.operators.triggered import TriggeredRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.runtime.stored.triggered import query_windows
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.windows import MAX_TIME
from weir.state import layout
from weir.state.keygroups import key_group, range_for_operator
from weir.state.memory import MemoryState


class _Late:
    """A sink for the late output: keeps what it gets."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def describe(self) -> str:
        return "memory://"

    def prepare(self) -> None:
        return None

    def open(self) -> _Late:
        return self

    def write(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


class Harness:
    """Flink's ``KeyedOneInputStreamOperatorTestHarness``, for one triggered window operator."""

    def __init__(
        self,
        tmp_path: Path,
        assigner: windows.WindowAssigner,
        trigger: triggers.Trigger | None = None,
        evictor: evictors.Evictor | None = None,
        lateness: int = 0,
        retention_ms: int = 10**9,
    ) -> None:
        job = Job("flink")
        stream = (
            job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
            .key_by("k")
            .window(assigner, allowed_lateness_ms=lateness)
        )
        if trigger is not None:
            stream = stream.trigger(trigger)
        if evictor is not None:
            stream = stream.evictor(evictor)
        stream.aggregate("op", sum=agg.sum("v"))
        self.op = job.operators["op"]
        self.tmp, self.restarts, self.retention = tmp_path, 0, retention_ms
        self.state = MemoryState()
        self.late_sink = _Late()
        self.late = LateRecords(self.late_sink)
        self.wm, self.now = MIN_WATERMARK, 0
        self.output: list[dict[str, Any]] = []
        self.rt = self._runtime()

    def _runtime(self) -> OperatorRuntime:
        rt = runtime_for(
            self.op, self.state, range_for_operator(128, 1, 0), 128, self.late,
            DeadLetters(None), self.retention,
        )  # fmt: skip
        if isinstance(rt, TriggeredRuntime):
            rt.clock = lambda: self.now
        return rt

    def process_element(self, key: str, value: int, ts: int) -> None:
        self.rt.process([key], [{"k": key, "v": value, "ts": ts}], [ts], [self.wm])
        self.output += self.rt.drain()

    def process_watermark(self, wm: int) -> None:
        self.wm = wm
        self.rt.advance(wm, wm)
        self.output += self.rt.drain()

    def set_processing_time(self, now: int) -> None:
        self.now = now
        self.rt.advance(self.wm, self.wm)
        self.output += self.rt.drain()

    def snapshot_and_restore(self) -> None:
        """Flush, checkpoint, close; restore into a new state backend and a new operator."""
        self.rt.flush()
        self.restarts += 1
        chk = self.tmp / f"chk-{self.restarts}"
        self.state.checkpoint(chk)
        self.state.close()
        self.state = MemoryState.restore(chk)
        self.rt = self._runtime()
        self.rt.restore(self.wm, self.wm)

    def sums(self) -> list[tuple[str, int]]:
        """Flink's output as ``(key, sum)``, sorted as its ``Tuple2ResultSortComparator``."""
        return sorted((r["key"], r["sum"]) for r in self.output)

    def late_records(self) -> list[int]:
        self.late.flush()
        return [r["ts"] for r in self.late_sink.records]


def test_flink_window_operator_test_count_trigger(tmp_path: Path) -> None:
    """WindowOperatorTest#testCountTrigger: GlobalWindows + PurgingTrigger.of(CountTrigger.of(4)),
    with a snapshot and restore after the seventh record."""
    h = Harness(tmp_path, windows.global_windows(), triggers.purging(triggers.count(4)))
    for key, ts in [("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 0), ("key1", 999),
                    ("key2", 1998), ("key2", 1999)]:  # fmt: skip
        h.process_element(key, 1, ts)
    h.snapshot_and_restore()
    h.process_element("key2", 1, 1000)
    assert h.sums() == [("key2", 4)]
    h.process_element("key1", 1, 10999)
    for _ in range(3):
        h.process_element("key2", 1, 1000)
    assert h.sums() == [("key1", 4), ("key2", 4), ("key2", 4)]
    # a purged global window reports the span of what it held, and is final
    first = h.output[0]
    assert (first["start"], first["end"], first["final"]) == (1998, 4000, True)


def test_flink_window_operator_test_count_trigger_is_windows_count(tmp_path: Path) -> None:
    """WindowOperatorTest#testCountTrigger again, through ``windows.count(4)`` (Flink's
    ``countWindow(4)`` is that very operator)."""
    h = Harness(tmp_path, windows.count(4))
    for key, ts in [("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 0), ("key1", 999),
                    ("key2", 1998), ("key2", 1999), ("key2", 1000)]:  # fmt: skip
        h.process_element(key, 1, ts)
    assert h.sums() == [("key2", 4)]


def test_flink_window_operator_test_continuous_watermark_trigger(tmp_path: Path) -> None:
    """WindowOperatorTest#testContinuousWatermarkTrigger: GlobalWindows +
    ContinuousEventTimeTrigger.of(3 s); it fires every 3 s of event time, never purging."""
    h = Harness(tmp_path, windows.global_windows(), triggers.continuous_event_time(3000))
    h.process_element("key1", 1, 0)
    for key, ts in [("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 999),
                    ("key2", 1998), ("key2", 1999), ("key2", 1000)]:  # fmt: skip
        h.process_element(key, 1, ts)
    h.process_watermark(1000)
    h.process_watermark(2000)
    assert h.sums() == []
    h.process_watermark(3000)
    assert h.sums() == [("key1", 3)]
    h.process_watermark(4000)
    h.process_watermark(5000)
    assert h.sums() == [("key1", 3)]
    h.process_watermark(6000)
    assert h.sums() == [("key1", 3), ("key1", 3), ("key2", 5)]
    h.process_watermark(7000)
    h.process_watermark(8000)  # "those don't have any effect..."
    assert len(h.output) == 3
    assert not any(r["final"] for r in h.output)  # a global window that is never purged


def test_flink_window_operator_test_continuous_watermark_trigger_survives_restore(
    tmp_path: Path,
) -> None:
    """testContinuousWatermarkTrigger with a snapshot and restore before the watermarks: the
    trigger's next firing is checkpointed with the window (and its timer with the timers)."""
    h = Harness(tmp_path, windows.global_windows(), triggers.continuous_event_time(3000))
    for key, ts in [("key1", 0), ("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 999),
                    ("key2", 1998), ("key2", 1999), ("key2", 1000)]:  # fmt: skip
        h.process_element(key, 1, ts)
    h.snapshot_and_restore()
    h.process_watermark(3000)
    assert h.sums() == [("key1", 3)]
    h.process_watermark(6000)
    assert h.sums() == [("key1", 3), ("key1", 3), ("key2", 5)]


def test_flink_window_operator_test_processing_time_tumbling_windows(tmp_path: Path) -> None:
    """WindowOperatorTest#testProcessingTimeTumblingWindows: processing-time tumbling windows of
    3 s with ProcessingTimeTrigger, on an injected clock (the records' timestamps are ignored)."""
    h = Harness(tmp_path, windows.tumbling(ms=3000, time="processing"), triggers.processing_time())
    h.set_processing_time(3)
    for key, ts in [("key2", MAX_TIME), ("key2", 7000), ("key2", 7000), ("key1", 7000),
                    ("key1", 7000)]:  # fmt: skip
        h.process_element(key, 1, ts)
    h.set_processing_time(5000)
    assert h.sums() == [("key1", 2), ("key2", 3)]
    for _ in range(3):
        h.process_element("key1", 1, 7000)
    h.set_processing_time(7000)
    assert h.sums() == [("key1", 2), ("key1", 3), ("key2", 3)]
    assert [(r["start"], r["end"]) for r in h.output[-1:]] == [(3000, 6000)]


def test_flink_window_operator_test_continuous_processing_time_trigger(tmp_path: Path) -> None:
    """ContinuousProcessingTimeTrigger on a global window: fires at each multiple of the
    interval the clock passes once the window holds a record, and its timer survives a
    restore."""
    h = Harness(tmp_path, windows.global_windows(), triggers.continuous_processing_time(1000))
    h.set_processing_time(10)
    h.process_element("key1", 1, 5)
    h.process_element("key1", 1, 6)
    h.set_processing_time(999)
    assert h.sums() == []
    h.snapshot_and_restore()
    h.set_processing_time(1000)
    assert h.sums() == [("key1", 2)]
    h.process_element("key1", 1, 7)
    h.set_processing_time(1500)
    assert h.sums() == [("key1", 2)]
    h.set_processing_time(2000)
    assert h.sums() == [("key1", 2), ("key1", 3)]
    h.process_element("key1", 1, 8)
    h.process_watermark(MAX_WATERMARK)  # the end of input: one last firing, then no timer
    assert h.sums() == [("key1", 2), ("key1", 3), ("key1", 4)]


def test_flink_window_operator_test_lateness(tmp_path: Path) -> None:
    """WindowOperatorTest#testLateness: tumbling 2 s, PurgingTrigger.of(EventTimeTrigger),
    allowed lateness 500 ms: a record within lateness fires at once with only itself (the
    window was purged), one past it is dropped to the late output."""
    h = Harness(
        tmp_path, windows.tumbling(ms=2000), triggers.purging(triggers.event_time()), lateness=500
    )
    h.process_element("key2", 1, 500)
    h.process_watermark(1500)
    h.process_element("key2", 1, 1300)
    h.process_watermark(2300)
    assert h.sums() == [("key2", 2)]
    # not dropped: window.maxTimestamp() + allowedLateness > currentWatermark
    h.process_element("key2", 1, 1997)
    assert h.sums() == [("key2", 1), ("key2", 2)]  # 1, not 3: the trigger fired and purged
    h.process_watermark(6000)
    # dropped: window.maxTimestamp() + allowedLateness < currentWatermark
    h.process_element("key2", 1, 1998)
    h.process_watermark(7000)
    assert h.late_records() == [1998]
    # weir's contract on top of Flink's output: the window's last emission is final
    assert [r["final"] for r in h.output] == [False, False, True]
    assert h.output[-1]["sum"] == 1


def test_flink_window_operator_test_cleanup_time_overflow(tmp_path: Path) -> None:
    """WindowOperatorTest#testCleanupTimeOverflow: a window ending near Long.MAX with lateness
    whose cleanup time would overflow is cleaned up at MAX (clamped) and still fires."""
    h = Harness(tmp_path, windows.tumbling(ms=1000), triggers.event_time(), lateness=2000)
    ts = MAX_TIME - 1750
    h.process_element("key1", 13, ts)
    h.process_watermark(ts)
    assert h.output == []
    h.process_watermark(MAX_WATERMARK)
    assert h.sums() == [("key1", 13)]
    assert h.output[0]["final"] is True  # its cleanup time (clamped to MAX) has passed


def test_flink_evicting_window_operator_test_count_trigger(tmp_path: Path) -> None:
    """EvictingWindowOperatorTest#testCountTrigger: GlobalWindows + CountTrigger.of(2) +
    CountEvictor.of(4), i.e. ``windows.count(4, slide=2)``."""
    h = Harness(tmp_path, windows.count(4, slide=2))
    for key, ts in [("key2", 3000), ("key2", 3999), ("key1", 20), ("key1", 0), ("key1", 999),
                    ("key2", 1998), ("key2", 1999), ("key2", 1000)]:  # fmt: skip
        h.process_element(key, 1, ts)
    assert h.sums() == [("key1", 2), ("key2", 2), ("key2", 4)]
    h.snapshot_and_restore()  # the kept records and the trigger's count are checkpointed
    h.process_element("key1", 1, 10999)
    h.process_element("key2", 1, 1000)
    assert h.sums() == [("key1", 2), ("key1", 4), ("key2", 2), ("key2", 4), ("key2", 4)]
    assert not any(r["final"] for r in h.output)


def test_flink_evicting_window_operator_test_tumbling_window_with_apply(tmp_path: Path) -> None:
    """EvictingWindowOperatorTest#testTumblingWindowWithApply: tumbling 4 s, EventTimeTrigger,
    CountEvictor.of(4): key1's six records are cut to its last four when the window fires."""
    h = Harness(tmp_path, windows.tumbling(ms=4000), evictor=evictors.count(4))
    h.process_element("key1", 1, 10)
    h.process_element("key1", 1, 100)
    h.process_watermark(1999)
    for key, ts in [("key1", 1997), ("key1", 1998), ("key1", 2310), ("key1", 2310),
                    ("key2", 2310), ("key2", 2310)]:  # fmt: skip
        h.process_element(key, 1, ts)
    h.process_watermark(3999)
    assert h.sums() == [("key1", 4), ("key2", 2)]


@pytest.mark.parametrize(("after", "want"), [(False, [2, 2, 4]), (True, [2, 4, 4])])
def test_time_evictor_before_and_after_the_function(
    tmp_path: Path, after: bool, want: list[int]
) -> None:
    """Flink's TimeEvictor semantics (keep ``t > newest - 1 s``) with a count trigger of 2 on
    a global window: evicting before the function, the second firing sees 1600 and 1700 only;
    after it, the function sees every record and the next firing what was left."""
    h = Harness(tmp_path, windows.global_windows(), triggers.count(2), evictors.time(1000, after))
    for ts in [0, 500, 1600, 1700, 2300, 2400]:
        h.process_element("key1", 1, ts)
    assert [r["sum"] for r in h.output] == want


def _query(h: Harness, key: str) -> list[tuple[int, int, list[Any], bool]]:
    """A key's windows as the query API reads them from the operator's state."""
    h.rt.flush()
    kg = key_group(key, 128)
    prefix = layout.key_prefix(kg, h.op.state_id, key.encode())
    rows = list(h.state.scan(prefix, layout.prefix_upper_bound(prefix)))
    return query_windows(h.op, FoldPlan(h.op.aggregates), rows, h.wm)


def test_count_window_query_shows_what_would_fire(tmp_path: Path) -> None:
    """A count window's state, as the query API reads it: after the evictor, the records the
    next firing would aggregate."""
    h = Harness(tmp_path, windows.count(3, slide=2))
    for ts in range(5):
        h.process_element("key1", 10 + ts, ts)
    # fired at 2 and 4 records; the next firing would see the last 3: ts 2, 3, 4
    assert _query(h, "key1") == [(2, 5, [12 + 13 + 14], False)]


def test_closed_time_windows_answer_queries_until_their_retention_passes(tmp_path: Path) -> None:
    """A triggered time window past its cleanup time answers queries, final, for the query
    retention (counted from the data watermark), then leaves the key's state."""
    h = Harness(
        tmp_path, windows.tumbling(ms=100), triggers.count(2), lateness=10, retention_ms=250
    )
    h.process_element("key1", 1, 5)
    h.process_element("key1", 2, 7)  # fires (0, 100): 3, not final
    h.process_element("key1", 4, 150)
    h.process_watermark(120)  # (0, 100) cleaned up: final emission, then closed
    assert [(r["start"], r["sum"], r["final"]) for r in h.output] == [(0, 3, False), (0, 3, True)]
    assert _query(h, "key1") == [(0, 100, [3], True), (100, 200, [4], False)]
    h.process_element("key1", 8, 420)
    h.process_watermark(415)  # (100, 200) closes; (0, 100) is past 109 + 250 ms: forgotten
    assert _query(h, "key1") == [(100, 200, [4], True), (400, 500, [8], False)]


def _session_lateness_case(h: Harness) -> list[list[tuple[int, int, int, bool]]]:
    """The records and watermarks of Flink's testDropDueToLatenessSession* cases; the windows
    emitted after each step as ``(start, end, sum, final)``."""
    steps: list[list[tuple[int, int, int, bool]]] = []

    def emitted() -> None:
        steps.append([(r["start"], r["end"], r["sum"], r["final"]) for r in h.output])
        h.output = []

    h.process_element("key2", 1, 1000)
    h.process_watermark(1999)
    h.process_element("key2", 1, 2000)
    h.process_watermark(4998)
    # not dropped: the session it joins has its max timestamp after the watermark
    h.process_element("key2", 1, 4500)
    h.process_element("key2", 1, 8500)  # a new session
    h.process_watermark(7400)
    h.process_element("key2", 1, 7000)  # merges the two sessions into one
    h.process_watermark(11501)
    emitted()
    h.process_element("key2", 1, 11600)  # a new session
    h.process_watermark(14600)
    emitted()
    h.process_element("key2", 1, 10000)
    emitted()
    h.process_element("key2", 1, 14500)
    h.process_watermark(20000)
    emitted()
    h.process_watermark(100000)
    emitted()
    return steps


def test_flink_window_operator_test_drop_due_to_lateness_session_with_lateness(
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testDropDueToLatenessSessionWithLateness: sessions of gap 3 s,
    EventTimeTrigger, allowed lateness 10 ms. The first session is cleaned up by the time 10000
    arrives, so 10000 joins 11600's session, whose max timestamp the watermark has passed: an
    immediate firing. weir adds the final emission of (1000, 11500) at its cleanup time."""
    h = Harness(tmp_path, windows.session(gap_ms=3000), lateness=10)
    assert _session_lateness_case(h) == [
        [(1000, 11500, 5, False)],
        [(11600, 14600, 1, False), (1000, 11500, 5, True)],
        [(10000, 14600, 2, False)],  # Flink's "key2-2", 10000L, 14600L
        [(10000, 17500, 3, True)],  # Flink's "key2-3", 10000L, 17500L
        [],
    ]
    assert h.late_records() == []


def test_flink_window_operator_test_drop_due_to_lateness_session_with_huge_lateness(
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testDropDueToLatenessSessionWithHugeLateness: as above with 10 s of
    allowed lateness: 10000 bridges every session into (1000, 14600) with 7 records, fired at
    once; 14500 extends it to (1000, 17500), fired at 20000 and final at 27499."""
    h = Harness(tmp_path, windows.session(gap_ms=3000), lateness=10_000)
    steps = _session_lateness_case(h)
    assert steps[0] == [(1000, 11500, 5, False)]
    assert steps[1] == [(11600, 14600, 1, False)]
    assert steps[2] == [(1000, 14600, 7, False)]  # Flink's "key2-7", 1000L, 14600L
    assert steps[3] == [(1000, 17500, 8, False)]  # Flink's "key2-8", 1000L, 17500L
    assert steps[4] == [(1000, 17500, 8, True)]  # weir: final once its lateness has passed


def test_flink_window_operator_test_cleanup_timer_with_empty_list_state_for_tumbling_windows(
    tmp_path: Path,
) -> None:
    """WindowOperatorTest#testCleanupTimerWithEmptyListStateForTumblingWindows, on the triggered
    operator (an evictor keeps the window's records as a list, Flink's ListState): tumbling 2 s,
    lateness 1 ms; the window fires at 1999 and its cleanup timer at 2000 leaves no contents, so
    nothing more is emitted afterwards than weir's final emission."""
    h = Harness(tmp_path, windows.tumbling(ms=2000), evictor=evictors.count(10), lateness=1)
    h.process_element("key2", 1, 1000)
    for wm in (1599, 1999):
        h.process_watermark(wm)
    assert [(r["sum"], r["final"]) for r in h.output] == [(1, False)]
    h.process_watermark(2000)  # the cleanup timer
    h.process_watermark(5000)
    assert [(r["sum"], r["final"]) for r in h.output] == [(1, False), (1, True)]
    h.process_element("key2", 1, 1500)  # past its lateness: dropped, the window stays done
    h.process_watermark(6000)
    assert h.late_records() == [1500] and len(h.output) == 2
