"""User-defined aggregates where accumulators must *merge*: sessions merging and sliding
windows composed from panes both call ``merge``; checked against brute force."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import Distinct, wait_until
from tests.support.inprocess import run_batches
from tests.support.reference import Spec
from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState

EVENTS = [(0, 1), (4, 2), (9, 1), (30, 3), (33, 3), (37, 4), (70, 5), (12, 2), (16, 6)]


class DistinctInPlace(Distinct):
    """The same aggregate written the other common way: ``add`` and ``merge`` change their
    first argument and return it. Windows composed from panes must not share a pane's list."""

    def add(self, acc: list[int], record: dict[str, Any]) -> list[int]:
        if record["value"] not in acc:
            acc.append(record["value"])
            acc.sort()
        return acc

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        a.extend(v for v in b if v not in a)
        a.sort()
        return a


def _job(assigner: Any, uda: Any = None) -> Job:
    job = Job("uda")
    (
        job.source(
            sources.jsonl("/unused"), watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5)
        )
        .key_by("id")
        .window(assigner, allowed_lateness_ms=100)
        .aggregate("imps", distinct=agg.custom(uda or Distinct()), n=agg.count())
    )
    return job


@pytest.mark.parametrize("uda", [Distinct(), DistinctInPlace()], ids=["pure", "in-place"])
@pytest.mark.parametrize(
    ("assigner", "windows_of"),
    [
        (
            windows.sliding(size_ms=20, slide_ms=5),
            lambda t: [(w.start, w.end) for w in windows.sliding(20, 5).assign(t)],
        ),
        (windows.session(gap_ms=10), None),
    ],
    ids=["sliding-panes", "session"],
)
def test_distinct_values_merge_across_panes_and_sessions(
    tmp_path: Path, assigner: Any, windows_of: Any, uda: Any
) -> None:
    evs = [{"id": "k", "event": "impression", "ts": t, "value": v} for t, v in EVENTS]
    run = run_batches(evs, Spec(bound=5, size=1, lateness=100), [2, 3, 4],
                      job=_job(assigner, uda))  # fmt: skip
    finals = {(r["start"], r["end"]): r for r in run.results if r["final"]}
    if windows_of is not None:
        expected: dict[tuple[int, int], set[int]] = {}
        for t, v in EVENTS:
            for w in windows_of(t):
                expected.setdefault(w, set()).add(v)
    else:  # sessions with gap 10, all within lateness: [0,26) from 0,4,9,12,16; [30,47); [70,80)
        expected = {(0, 26): {1, 2, 6}, (30, 47): {3, 4}, (70, 80): {5}}
    assert {w: r["distinct"] for w, r in finals.items()} == {w: len(v) for w, v in expected.items()}


def test_processing_time_timers_fire_on_the_clock() -> None:
    class Reminder:
        def process(self, event: dict[str, Any], ctx: Any) -> None:
            ctx.register_processing_time_timer(ctx.processing_time + 30)

        def on_timer(self, timestamp: int, ctx: Any) -> None:
            ctx.emit({"key": ctx.key, "at": timestamp})

    job = Job("pt")
    job.source(sources.jsonl("/unused")).key_by("id").process(Reminder(), name="remind")
    state = MemoryState()
    rt = ProcessRuntime(job.operators["remind"], state, range_for_operator(128, 1, 0), 128,
                        LateRecords(None), DeadLetters(None), 0)  # fmt: skip
    before = int(time.time() * 1000)
    rt.process(["a"], [{"id": "a"}], [1], [0])
    rt.advance(0, 0)
    assert rt.drain() == []  # not yet: the timer is 30 ms ahead of the clock

    def fired() -> list[Any] | None:
        rt.advance(0, 0)
        return rt.drain() or None

    out = wait_until(fired, 5.0, interval=0.01, what="the processing-time timer")
    assert out[0]["key"] == "a" and out[0]["at"] >= before + 30
    state.close()
