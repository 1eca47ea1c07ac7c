"""Keyed process functions: whatever the batching, a function sees the same records, the same
watermarks and the same timer firings in the same order, so it emits the same output and leaves
the same state. Value, list and map state and event-time timers are all exercised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING, cuts, events
from tests.support.inprocess import run_batches
from tests.support.reference import Spec
from weir import Job, WatermarkStrategy, sources


class Journal:
    """Logs every call, keeps a count, the last values and a per-event tally in state, and sets
    a timer 25 ms after each record (deleting the previous one every third record)."""

    def process(self, event: dict[str, Any], ctx: Any) -> None:
        n = ctx.value("n")
        n.set(n.get(0) + 1)
        ctx.list("last").append(event["value"])
        tally = ctx.map("tally")
        tally.put(event["event"], tally.get(event["event"], 0) + 1)
        if n.get() % 3 == 0:
            ctx.delete_event_time_timer(ctx.timestamp + 24)
        ctx.register_event_time_timer(ctx.timestamp + 25)
        ctx.emit(["record", ctx.key, ctx.timestamp, ctx.watermark, n.get()])

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit(["timer", ctx.key, timestamp, ctx.value("n").get(0), len(ctx.list("last").get())])


def _job() -> Job:
    job = Job("proc")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=10),
        )
        .key_by("id")
        .process(Journal(), name="journal")
    )
    return job


SPEC = Spec(bound=10, size=1, lateness=0, op="journal")


@settings(BATCHING, max_examples=60)
@given(data=st.data())
def test_process_function_output_does_not_depend_on_batching(data: st.DataObject) -> None:
    evs = data.draw(events(bad=False))
    sizes, flushes = data.draw(cuts(len(evs)))
    one = run_batches(evs, SPEC, [1] * len(evs), job=_job())
    cut = run_batches(evs, SPEC, sizes, flush_after=flushes, job=_job())
    assert cut.results == one.results
    records = [r for r in one.results if r[0] == "record"]
    assert len(records) == len(evs)
    # every firing is of a time some record of that key registered (ts + 25); a time registered
    # again after it fired fires again, as in Flink
    registered = {(r[1], r[2] + 25) for r in records}
    assert {(r[1], r[2]) for r in one.results if r[0] == "timer"} <= registered


def test_timers_fire_before_the_record_that_arrives_under_their_watermark(
    tmp_path: Path,
) -> None:
    evs = [{"id": "k", "event": "impression", "ts": t, "value": 1} for t in (0, 30, 100)]
    run = run_batches(evs, SPEC, [3], job=_job())
    kinds = [(r[0], r[2]) for r in run.results]
    # record 30 arrives under watermark -11 (max 0 - 10 - 1): no timer yet; record 100 arrives
    # under 19 (max 30 - 11): still none; then the watermark moves to 89: timer 25 and 55 fire
    assert kinds[:3] == [("record", 0), ("record", 30), ("record", 100)]
    assert ("timer", 25) in kinds and ("timer", 55) in kinds
    assert kinds.index(("timer", 55)) < kinds.index(("timer", 125))  # 125 fires at end of input
