"""Sums past what msgpack holds (-2**63 .. 2**64 - 1) are flushed to RocksDB, restored and
summed on exactly (issue 38: "int64 overflow handled exactly"), by the dict operator and the
column operator on both kernel implementations. Before ``state.slotpack`` the state writer
failed with msgpack's ``OverflowError`` and such a window could never be flushed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weir import agg, windows
from weir.base.jsonenc import dumps_json
from weir.engine.kernels import Kernels
from weir.engine.nodes import WindowNode
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.keygroups import range_for_operator
from weir.state.rocksdb import RocksState
from weir.state.slotpack import packer, unpackb
from weir.testing import Collected

BIG = (1 << 63) - 1
OP = WindowNode(
    "w",
    "k",
    windows.tumbling(ms=10),
    30,
    {
        "n": agg.count(),
        "s": agg.sum("v"),
        "ss": agg.sum("v", nulls="skip"),
        "m": agg.mean("v"),
        "a": agg.avg("v"),
    },
)
FIRST = [("a", 1, BIG), ("a", 2, BIG), ("a", 3, BIG), ("b", 4, -BIG), ("b", 5, -BIG)]
FIRST += [("b", 6, -BIG), ("b", 7, -BIG), ("c", 8, 1 << 63), ("c", 9, (1 << 64) - 1)]
THEN = [("a", 4, 1), ("c", 5, 1 << 70), ("b", 15, 1)]


def _runtime(rt_type: type[WindowRuntime], state: RocksState, **kw: Any) -> Any:
    late, dead = LateRecords(Collected()), DeadLetters(Collected())
    groups = range_for_operator(128, 1, 0)
    return rt_type(OP, state, groups, 128, late, dead, 3_600_000, **kw)


def _feed(rt: Any, rows: list[tuple[str, int, int]], wm: int) -> list[dict[str, Any]]:
    recs = [{"k": k, "t": t, "v": v} for k, t, v in rows]
    rt.process([r[0] for r in rows], recs, [r[1] for r in rows], [wm] * len(rows))
    rt.advance(wm, wm, [wm])
    out: list[dict[str, Any]] = rt.drain()
    return out


def _run(tmp: Path, rt_type: type[WindowRuntime], **kw: Any) -> list[dict[str, Any]]:
    """FIRST, flushed to RocksDB on real files, reopened, restored, then THEN to the end."""
    db = RocksState(tmp / "db")
    try:
        rt = _runtime(rt_type, db, **kw)
        results = _feed(rt, FIRST, 0)
        rt.flush()  # the state writer's OverflowError, before slotpack
    finally:
        db.close()
    db = RocksState(tmp / "db")
    try:
        rt = _runtime(rt_type, db, **kw)
        rt.restore(0, 0)
        results += _feed(rt, THEN, 12)
        rt.advance(MAX_WATERMARK, MAX_WATERMARK, [MAX_WATERMARK])
        results += rt.drain()
        rt.flush()
    finally:
        db.close()
    return results


def test_sums_past_msgpack_flush_and_restore_exactly(tmp_path: Path, kernels: Kernels) -> None:
    want = _run(tmp_path / "dict", WindowRuntime)
    got = _run(tmp_path / "cols", ColumnWindowRuntime, kernels=kernels)
    assert got == want
    final = {r["key"]: r for r in want if r["final"] and r["start"] == 0}
    assert final["a"]["s"] == 3 * BIG + 1 == final["a"]["ss"]
    assert final["b"]["s"] == -4 * BIG and final["b"]["a"] == -BIG
    assert final["c"]["s"] == (1 << 63) + (1 << 64) - 1 + (1 << 70)


@pytest.mark.parametrize("value", [1 << 64, -(1 << 63) - 1, 1 << 200, -(1 << 200), BIG, 0])
def test_slotpack_round_trips_any_int(value: int) -> None:
    assert unpackb(packer().pack([value, 1.5, None])) == [value, 1.5, None]


def test_a_sink_writes_an_int_past_64_bits_exactly() -> None:
    """orjson refuses such an int; the record is written by ``json`` instead, exactly."""

    record = {"key": "c", "total": (1 << 63) + (1 << 70), "m": 1.5, "u": "ü", 3: None}
    line = dumps_json(record)
    assert json.loads(line) == {"key": "c", "total": (1 << 63) + (1 << 70), "m": 1.5,
                                "u": "ü", "3": None}  # fmt: skip
    assert dumps_json({"key": "a", "n": 1}) == b'{"key":"a","n":1}'  # orjson's own
