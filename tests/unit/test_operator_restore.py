"""Window operators checkpointed, closed and restored in the middle of their input, as in
Flink's ``StateBackendTestBase`` window tests: the results before the checkpoint and after the
restore are those of one uninterrupted run, window by window. State is the in-memory backend,
checkpointed to a file and restored into a new instance and a new runtime."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.reference import group_emissions
from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.factory import runtime_for
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState

BOUND = 20
ASSIGNERS = {
    "tumbling": windows.tumbling(ms=100),
    "sliding": windows.sliding(size_ms=100, slide_ms=30),
    "session": windows.session(gap_ms=40),
}


def _runtime(assigner: windows.WindowAssigner, state: StateBackend) -> OperatorRuntime:
    job = Job("j")
    (
        job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
        .key_by("id")
        .window(assigner, allowed_lateness_ms=60)
        .aggregate("op", n=agg.count(), total=agg.sum("v"))
    )
    keys = range_for_operator(128, 1, 0)
    return runtime_for(
        job.operators["op"], state, keys, 128, LateRecords(None), DeadLetters(None), 10**9
    )


def _batches(seed: int) -> list[list[dict[str, Any]]]:
    """Batches of 10 records over a few keys, some up to 150 ms behind: on time, within
    lateness, or too late."""
    rng = random.Random(seed)
    recs = [
        {"id": f"k{rng.randrange(4)}", "ts": max(0, t * 7 - rng.choice([0, 0, 0, 40, 150])), "v": t}
        for t in range(200)
    ]
    return [recs[i : i + 10] for i in range(0, len(recs), 10)]


def _feed(rt: OperatorRuntime, batches: list[list[dict[str, Any]]], wm: int) -> int:
    """Each batch under the watermark before it, then the watermark after it; returns the last."""
    for batch in batches:
        ts = [r["ts"] for r in batch]
        rt.process([r["id"] for r in batch], batch, ts, [wm] * len(batch))
        wm = max(wm, max(ts) - BOUND)
        rt.advance(wm, wm)
    return wm


def _finish(rt: OperatorRuntime) -> list[Any]:
    rt.advance(MAX_WATERMARK, MAX_WATERMARK, [MAX_WATERMARK])
    return rt.drain()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cut", [3, 11])
@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_a_restored_operator_goes_on_as_if_never_stopped(
    tmp_path: Path, kind: str, cut: int, seed: int
) -> None:
    assigner, batches = ASSIGNERS[kind], _batches(seed)
    whole = _runtime(assigner, MemoryState())
    _feed(whole, batches, -1)
    want = whole.drain() + _finish(whole)

    state = MemoryState()
    first = _runtime(assigner, state)
    wm = _feed(first, batches[:cut], -1)
    got = first.drain()
    first.flush()  # as a worker does before its checkpoint
    state.checkpoint(tmp_path / "chk")
    state.close()
    restored = MemoryState.restore(tmp_path / "chk")
    second = _runtime(assigner, restored)
    second.restore(wm, wm)
    _feed(second, batches[cut:], wm)
    got += second.drain() + _finish(second)
    restored.close()
    assert len(want) > 10 and any(not r["final"] for r in want)  # late updates happened
    # each window's emissions in the same order (windows firing at one watermark may come in
    # another order: the restored runtime meets its keys in key-group order)
    assert group_emissions(got) == group_emissions(want)
