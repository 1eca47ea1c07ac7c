"""The window operator on columns (``ColumnWindowRuntime``) against the dict operator
(``WindowRuntime``), on both kernel implementations: the same batches, watermarks and flushes
give the same results (value for value and type for type: ints past int64, floats added in
arrival order), the same late records and dead letters, the same state in the backend, and
the same state again after a restore from it."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import stored_windows
from weir import agg, windows
from weir.engine.kernels import Kernels
from weir.engine.nodes import WindowNode
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState
from weir.testing import Collected

BIG = (1 << 63) - 1
ABSENT = "<absent>"  # a record without the field
VALUES = st.one_of(
    st.integers(-50, 50),
    st.sampled_from([BIG - 3, BIG + 5, 1 << 62, 0.5, -2.25, 1e300]),
    st.sampled_from([BIG, -BIG - 1, 1 << 64, -(1 << 70)]),  # sums past what msgpack holds
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["7", None, True, ABSENT]),  # not numbers: dead letters (SQL: NULLs skip)
)
ROW = st.tuples(st.sampled_from(["a", "b", "ü", "7"]), st.integers(0, 60), VALUES)
ASSIGNERS = {
    "tumbling": windows.tumbling(ms=10),
    "offset": windows.tumbling(ms=7, offset_ms=3),
    "cumulate": windows.cumulate(size_ms=20, step_ms=5),
    "whole-slide": windows.sliding(size_ms=10, slide_ms=10),
}


AGGREGATES = {
    "job": {  # the job API's defaults: a NULL is a dead letter
        "n": agg.count(),
        "total": agg.sum("v"),
        "lo": agg.min("v"),
        "hi": agg.max("v"),
        "avg": agg.mean("v"),
    },
    "sql": {  # SQL's: NULLs pass over, COUNT(x), AVG, a cast, window_time
        "n": agg.count(),
        "nv": agg.count("v"),
        "total": agg.sum("v", nulls="skip"),
        "lo": agg.min("v", nulls="skip"),
        "hi": agg.max("v", nulls="skip"),
        "m": agg.mean("v", nulls="skip"),
        "avg": agg.avg("v"),
        "t": agg.window_time(),
        "c": agg.cast(agg.max("v", nulls="skip"), "str"),
    },
}


def _op(assigner: str, lateness: int, aggs: str = "job") -> WindowNode:
    aggregates = AGGREGATES[aggs]
    return WindowNode("w", "k", ASSIGNERS[assigner], lateness, dict(aggregates))


class Run:
    """One runtime over its own backend, with its outputs collected."""

    def __init__(
        self,
        rt_type: type[WindowRuntime],
        op: WindowNode,
        state: MemoryState | None = None,
        **kw: Any,
    ) -> None:
        self.state = MemoryState() if state is None else state
        self.late_out, self.dead_out = Collected(), Collected()
        self.late, self.dead = LateRecords(self.late_out), DeadLetters(self.dead_out)
        groups = range_for_operator(128, 1, 0)
        self.rt = rt_type(op, self.state, groups, 128, self.late, self.dead, 3_600_000, **kw)
        self.results: list[dict[str, Any]] = []

    def feed(self, rows: list[tuple[str, int, Any]], wm: int) -> None:
        keys = [k for k, _, _ in rows]
        recs = [{"k": k, "t": t} if v == ABSENT else {"k": k, "t": t, "v": v} for k, t, v in rows]
        ts = [t for _, t, _ in rows]
        self.rt.process(keys, recs, ts, [wm] * len(rows))
        self.rt.advance(wm, wm, [wm])
        self.results += self.rt.drain()
        self.late.flush()
        self.dead.flush()

    def finish(self) -> None:
        self.rt.advance(MAX_WATERMARK, MAX_WATERMARK, [MAX_WATERMARK])
        self.results += self.rt.drain()
        self.rt.flush()
        self.late.flush()
        self.dead.flush()

    def stored(self) -> dict[tuple[bytes, int], Any]:
        """Each stored window row (the newest of each key and window in the cells), whatever
        generations and merges wrote it; cleanup timers left out (their order varies)."""
        entries = self.state.scan(b"", b"\xff" * 8)
        sid = self.rt.op.state_id
        return {(k, end): _bits(s) for k, _, end, s in stored_windows(entries, sid)}


def _bits(x: Any) -> Any:
    if isinstance(x, list):
        return [_bits(v) for v in x]
    if isinstance(x, dict):
        return {k: _bits(v) for k, v in x.items()}
    return (float, struct.pack("<d", x)) if type(x) is float else (type(x), x)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.lists(ROW, max_size=8), st.integers(0, 25)), max_size=8),
    st.sampled_from(sorted(ASSIGNERS)),
    st.sampled_from([0, 5, 40]),
    st.lists(st.booleans(), max_size=8),
    st.sampled_from(sorted(AGGREGATES)),
)
def test_column_operator_equals_dict_operator(
    kernels: Kernels,
    batches: list[tuple[list[tuple[str, int, Any]], int]],
    assigner: str,
    lateness: int,
    flushes: list[bool],
    aggs: str,
) -> None:
    op = _op(assigner, lateness, aggs)
    want = Run(WindowRuntime, op)
    got = Run(ColumnWindowRuntime, op, kernels=kernels)
    wm = -1
    for i, (rows, step) in enumerate(batches):
        for run in (want, got):
            run.feed(rows, wm)
            if i < len(flushes) and flushes[i]:
                run.rt.flush()
        wm += step
    assert got.rt.open_windows == want.rt.open_windows
    for run in (want, got):
        run.finish()
    assert _bits(got.results) == _bits(want.results)
    assert got.late_out.records == want.late_out.records
    assert got.dead_out.records == want.dead_out.records
    assert got.stored() == want.stored()


@pytest.mark.parametrize("aggs", sorted(AGGREGATES))
@pytest.mark.parametrize("assigner", sorted(ASSIGNERS))
def test_restored_column_operator_goes_on_as_the_dict_operator(
    kernels: Kernels, assigner: str, aggs: str
) -> None:
    """Open windows come back from the backend into the kernels' accumulators (ints past
    int64 included, and NULL slots), fired ones within lateness into ``awaiting_final``."""
    op = _op(assigner, 30, aggs)
    first = [("a", 1, BIG), ("a", 2, 5), ("b", 3, 1.5), ("ü", 12, -BIG - 1), ("a", 14, 2)]
    if aggs == "sql":
        first += [("c", 5, None), ("c", 6, ABSENT), ("d", 7, None), ("d", 8, 2)]
    runs = []
    for rt_type in (WindowRuntime, ColumnWindowRuntime):
        kw: dict[str, Any] = {"kernels": kernels} if rt_type is ColumnWindowRuntime else {}
        run = Run(rt_type, op, **kw)
        run.feed(first, 9)
        run.rt.flush()
        again = Run(rt_type, op, run.state, **kw)
        again.rt.restore(9, 9)
        again.feed([("a", 4, 1), ("b", 15, 3), ("ü", 13, 2)], 12)
        again.finish()
        runs.append(again)
    want, got = runs
    assert _bits(got.results) == _bits(want.results)
    assert got.stored() == want.stored()
