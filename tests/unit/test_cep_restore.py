"""The pattern operator checkpointed, closed and restored in the middle of its input (as
``test_operator_restore.py`` does for windows): queued events, partial matches and the shared
buffer are keyed state, so the matches and timeouts after the restore are those of one
uninterrupted run. State is the in-memory backend, checkpointed to a file and restored into a
new instance and a new runtime."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources
from weir.engine.cep import Pattern
from weir.engine.runtime.operators.factory import runtime_for
from weir.engine.runtime.operators.process import ProcessRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState

BOUND = 20


def _runtime(state: StateBackend) -> ProcessRuntime:
    job = Job("j")
    pattern = (
        Pattern.begin("a").where(lambda e: e["kind"] == "a")
        .followed_by_any("b").where(lambda e: e["kind"] == "b").one_or_more()
        .followed_by("c").where(lambda e: e["kind"] == "c")
        .within(120)
    )  # fmt: skip
    stream = job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
    stream.key_by("id").pattern(pattern).select(name="op")
    rt = runtime_for(
        job.operators["op"], state, range_for_operator(128, 1, 0), 128, LateRecords(None),
        DeadLetters(None), 10**9,
    )  # fmt: skip
    assert isinstance(rt, ProcessRuntime)
    return rt


def _batches(seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    recs = [
        {"id": f"k{rng.randrange(3)}", "ts": max(0, t * 5 - rng.choice([0, 0, 15, 80])), "n": t,
         "kind": rng.choice("aabbc")}
        for t in range(100)
    ]  # fmt: skip
    return [recs[i : i + 10] for i in range(0, len(recs), 10)]


def _feed(rt: ProcessRuntime, batches: list[list[dict[str, Any]]], wm: int) -> int:
    for batch in batches:
        ts = [r["ts"] for r in batch]
        rt.process([r["id"] for r in batch], batch, ts, [wm] * len(batch))
        wm = max(wm, max(ts) - BOUND)
        rt.advance(wm, wm)
    return wm


def _out(rt: ProcessRuntime) -> Counter[Any]:
    found: Counter[Any] = Counter()
    for r in rt.drain():
        found[("match", r["key"], tuple(e["n"] for v in r["match"].values() for e in v))] += 1
    for tag, recs in rt.drain_side().items():
        for r in recs:
            events = tuple(e["n"] for v in r.get("match", {}).values() for e in v)
            found[(tag, r["key"], events or r.get("record", {}).get("n"))] += 1
    return found


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("cut", [4, 9])
def test_a_restored_pattern_operator_goes_on_as_if_never_stopped(
    tmp_path: Path, cut: int, seed: int
) -> None:
    batches = _batches(seed)
    whole = _runtime(MemoryState())
    _feed(whole, batches, -1)
    whole.advance(MAX_WATERMARK, MAX_WATERMARK)
    want = _out(whole)

    state = MemoryState()
    first = _runtime(state)
    wm = _feed(first, batches[:cut], -1)
    got = _out(first)
    first.flush()  # as a worker does before its checkpoint
    state.checkpoint(tmp_path / "chk")
    state.close()
    restored = MemoryState.restore(tmp_path / "chk")
    second = _runtime(restored)
    second.restore(wm, wm)
    _feed(second, batches[cut:], wm)
    second.advance(MAX_WATERMARK, MAX_WATERMARK)
    got += _out(second)
    restored.close()
    assert sum(n for k, n in want.items() if k[0] == "match") > 5
    assert any(k[0] == "timed-out" for k in want) and any(k[0] == "late" for k in want)
    assert got == want


def _held(rt: ProcessRuntime) -> int:
    """The partial matches the keys' ``partial_matches`` states say they hold."""
    return sum((v or {}).get("count", 0) for v in rt._state_values("partial_matches"))


def test_the_operator_counts_its_partial_matches_and_timeouts_across_a_restore(
    tmp_path: Path,
) -> None:
    batches = _batches(3)
    state = MemoryState()
    first = _runtime(state)
    wm = _feed(first, batches[:6], -1)
    held = first.metrics["partial_matches"]
    timed_out = sum(1 for k, n in _out(first).items() for _ in range(n) if k[0] == "timed-out")
    assert held > 0 and held == _held(first)
    assert first.metrics.get("timed_out", 0) == timed_out > 0
    first.flush()
    state.checkpoint(tmp_path / "chk")
    state.close()
    restored = MemoryState.restore(tmp_path / "chk")
    second = _runtime(restored)
    second.restore(wm, wm)
    assert second.metrics == {"partial_matches": held}  # the gauge comes back; counters restart
    _feed(second, batches[6:], wm)
    second.advance(MAX_WATERMARK, MAX_WATERMARK)
    later = sum(1 for k, n in _out(second).items() for _ in range(n) if k[0] == "timed-out")
    assert second.metrics == {"partial_matches": 0, "timed_out": later}
    restored.close()
