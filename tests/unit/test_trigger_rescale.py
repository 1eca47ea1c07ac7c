"""Triggered windows rescale by key groups: checkpointed by one operator instance, restored
into two that each own half of the key groups, they go on exactly as one uninterrupted
instance (kept records, trigger state and event-time timers all travel with their key)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, agg, evictors, sources, triggers, windows
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.factory import runtime_for
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange, key_group, range_for_operator
from weir.state.memory import MemoryState

M = 128
KEYS = [f"k{i}" for i in range(12)]  # k10 and k11 are in the upper half of the key groups
RECORDS = [{"id": KEYS[i % 12], "ts": i * 13, "v": i % 5} for i in range(500)]


def _runtime(state: StateBackend, groups: KeyGroupRange, kind: str) -> OperatorRuntime:
    job = Job("j", max_parallelism=M)
    keyed = job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy()).key_by("id")
    if kind == "continuous":
        windowed = (
            keyed.window(windows.global_windows())
            .trigger(triggers.continuous_event_time(200))
            .evictor(evictors.count(5))
        )
    elif kind == "session":  # a key's records are 156 ms apart: some sessions merge, some not
        windowed = (
            keyed.window(windows.dynamic_session(lambda e: 160 if e["v"] < 3 else 100))
            .trigger(triggers.count(3))
            .evictor(evictors.count(4))
        )
    else:
        windowed = keyed.window(windows.count(6, slide=4))
    windowed.aggregate("op", n=agg.count(), total=agg.sum("v"))
    return runtime_for(
        job.operators["op"], state, groups, M, LateRecords(None), DeadLetters(None), 10**9
    )


def _feed(
    rt: OperatorRuntime,
    recs: list[dict[str, Any]],
    wm: int,
    groups: KeyGroupRange | None = None,
) -> list[dict[str, Any]]:
    """Each record under the watermark before it (the stream's, so every worker sees the same
    watermarks), processed only by the instance whose key groups hold its key."""
    for r in recs:
        if groups is None or groups.start <= key_group(r["id"], M) <= groups.end:
            rt.process([r["id"]], [r], [r["ts"]], [wm])
        wm = max(wm, r["ts"] - 1)
        rt.advance(wm, wm)
    return rt.drain()


def _per_key(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        out[r["key"]].append(r)
    return dict(out)


@pytest.mark.parametrize("kind", ["continuous", "count-slide", "session"])
def test_a_checkpoint_of_one_instance_restores_into_two_halves(tmp_path: Path, kind: str) -> None:
    whole = _runtime(MemoryState(), range_for_operator(M, 1, 0), kind)
    want = _feed(whole, RECORDS, -1)
    whole.advance(MAX_WATERMARK, MAX_WATERMARK)
    want += whole.drain()

    cut = 150
    state = MemoryState()
    first = _runtime(state, range_for_operator(M, 1, 0), kind)
    got = _feed(first, RECORDS[:cut], -1)
    wm = RECORDS[cut - 1]["ts"] - 1
    first.flush()
    state.checkpoint(tmp_path / "chk")
    state.close()
    for index in range(2):
        groups = range_for_operator(M, 2, index)
        restored = MemoryState.restore(tmp_path / "chk")
        half = _runtime(restored, groups, kind)
        half.restore(wm, wm)
        got += _feed(half, RECORDS[cut:], wm, groups)
        half.advance(MAX_WATERMARK, MAX_WATERMARK)
        got += half.drain()
        restored.close()
    assert len(want) > 50
    assert set(_per_key(want)) == set(KEYS)
    owners = {key_group(k, M) > range_for_operator(M, 2, 0).end for k in KEYS}
    assert owners == {False, True}  # both halves own keys of this input
    assert _per_key(got) == _per_key(want)
