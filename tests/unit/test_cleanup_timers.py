"""Cleanup timers of window state: a column window's name the cell buckets that hold a fired
window's keys (``codec.encode_bucket_timer``) instead of listing the keys, and a purge deletes
the same state either way, including timers an older version (or the dict runtime, or a
backfill) wrote as key lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weir import agg, windows
from weir.engine.kernels import Kernels
from weir.engine.nodes import WindowNode
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import BUCKET_TIMER, decode_bucket_timer
from weir.state import layout
from weir.state.keygroups import range_for_operator
from weir.state.rocksdb import RocksState
from weir.testing import Collected

OP = WindowNode("w", "k", windows.tumbling(ms=10), 0, {"n": agg.count()})
KEYS = [f"key-{i}" for i in range(300)]  # across most of the 128 key groups and many buckets
RETENTION_MS = 100


def _runtime(rt_type: type[WindowRuntime], state: RocksState, **kw: Any) -> Any:
    late, dead = LateRecords(Collected()), DeadLetters(Collected())
    return rt_type(OP, state, range_for_operator(128, 1, 0), 128, late, dead, RETENTION_MS, **kw)


def _feed(rt: Any, keys: list[str], t: int) -> None:
    rt.process(keys, [{"k": k, "t": t} for k in keys], [t] * len(keys), [t - 1] * len(keys))
    rt.advance(t, t, [t])
    rt.drain()


def _entries(db: RocksState, sid: int) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in db.scan(b"", b"\xff" * 8) if k[2:4] == sid.to_bytes(2, "big")]


def _fire_window_0(rt: Any) -> None:
    _feed(rt, KEYS, 5)  # window [0, 10) of every key
    _feed(rt, ["late-comer"], 20)  # fires it (and opens [20, 30))
    rt.flush()


def test_a_column_window_names_buckets_and_its_purge_deletes_every_cell(
    tmp_path: Path, kernels: Kernels
) -> None:
    db = RocksState(tmp_path / "db")
    try:
        rt = _runtime(ColumnWindowRuntime, db, kernels=kernels)
        _fire_window_0(rt)
        timers = _entries(db, OP.timer_state_id)
        assert timers and all(v[:1] == BUCKET_TIMER for _, v in timers)
        assert sum(decode_bucket_timer(v)[0] for _, v in timers) == len(KEYS)
        assert len(timers) <= 128  # one per key group the keys fall in, whatever their number
        _feed(rt, ["late-comer"], 10 + RETENTION_MS + 50)  # the data watermark passes retention
        # every key's [0, 10) and the late-comer's [20, 30): retention passed for both
        assert rt.purge(force=True) == len(KEYS) + 1
        rt.flush()
        ends = {layout.decode_timer_key(k)[2] for k, _ in _entries(db, OP.timer_state_id)}
        assert not ends & {10, 30}
        assert not rt.stored_window_in(OP.state_id, 10, 30), "purged windows are still stored"
        assert rt.stored_window_in(OP.state_id, 170, 170) is not None  # the open one is kept
    finally:
        db.close()


def test_timers_listing_keys_from_an_older_state_are_purged_by_a_column_window(
    tmp_path: Path, kernels: Kernels
) -> None:
    db = RocksState(tmp_path / "db")
    try:
        before = _runtime(WindowRuntime, db)  # writes cleanup timers as key lists
        _fire_window_0(before)
        timers = _entries(db, OP.timer_state_id)
        assert timers and not any(v[:1] == BUCKET_TIMER for _, v in timers)
        rt = _runtime(ColumnWindowRuntime, db, kernels=kernels)
        rt.restore(20, 20)
        _feed(rt, ["late-comer"], 10 + RETENTION_MS + 50)
        assert rt.purge(force=True) == len(KEYS) + 1
        rt.flush()
        assert not rt.stored_window_in(OP.state_id, 10, 30), "purged windows are still stored"
    finally:
        db.close()


def test_the_bucket_timer_codec_examples_run() -> None:
    import doctest

    from weir.engine.runtime.stored import codec

    failed, tried = doctest.testmod(codec)
    assert failed == 0 and tried > 0
