"""The backfill's Python path without Spark (Spark only moves and sorts the rows between the
stages): a split's pairs (``pairs_of_split``), sorted as ``sortWithinPartitions`` sorts them,
through ``python_ssts``, give SST files whose window state is what the streaming operators
store after reading the same events in batches (sessions byte for byte; cells row for row,
whatever generations hold the rows); sessions and user-defined aggregates,
late records included."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from tests.support import BUILTINS, UDA_JOB_BOUND, WITH_UDA, make_events, uda_job_text, write_events
from tests.support.inprocess import run_batches
from tests.support.reference import Spec
from weir.base.errors import JobDefinitionError
from weir.engine.agg import UserDefined
from weir.engine.runtime.loader import load_job
from weir.engine.runtime.stored import stores_cells
from weir.engine.runtime.stored.codec import decode_session
from weir.engine.spark.inputs import file_batches
from weir.engine.spark.pairs import pairs_of_split
from weir.engine.spark.plan import Plan, backfill_operator, python_path
from weir.engine.spark.sst import python_ssts
from weir.state import cells
from weir.state.backend import StateBackend
from weir.state.layout import decode_state_key
from weir.state.memory import MemoryState
from weir.state.rocksdb import RocksState

BOUND = UDA_JOB_BOUND
CASES = {
    "tumbling-uda": ("windows.tumbling(ms=700)", 300, WITH_UDA),
    "sliding-uda-panes": ("windows.sliding(size_ms=1000, slide_ms=300)", 800, WITH_UDA),
    "session-uda": ("windows.session(gap_ms=150)", 500, WITH_UDA),
    "session-builtins": ("windows.session(gap_ms=100)", 0, BUILTINS),
}


def _job(tmp: Path, case: str) -> Path:
    path = tmp / f"{case}.py"
    path.write_text(uda_job_text(*CASES[case]))
    return path


def _backfill(tmp: Path, job_file: Path, src: Path, **window: int | None) -> tuple[Any, int]:
    """The Python path's stages in this process: the window state of the SST files (timers
    left out) and the late records counted by both stages."""
    out = tmp / "out"
    for sub in ("sst", "stats", "errors"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    plan = Plan(str(job_file), "t1", "imps", 128, window.get("from_ms"), window.get("to_ms"),
                str(out))  # fmt: skip
    cols: dict[str, list[Any]] = {}
    for batch in pairs_of_split(plan, str(src), file_batches(str(src), "jsonl")):
        for name, values in batch.items():
            cols.setdefault(name, []).extend(values)
    order = sorted(range(len(cols["kg"])), key=lambda i: tuple(
        cols[c][i] for c in ("kg", "key", "end", "wm", "split", "seq")))  # fmt: skip
    rows = pa.RecordBatch.from_pydict({c: [v[i] for i in order] for c, v in cols.items()})
    written = list(python_ssts(plan, iter([rows[:1000], rows[1000:]])))  # across Arrow batches
    stats = [json.loads(p.read_text()) for p in (out / "stats").glob("*.json")]
    late = sum(s["late"] for s in stats) + sum(w["late"] for w in written)
    state = RocksState(tmp / f"backfill-db-{len(list(tmp.glob('backfill-db-*')))}")
    state.ingest(sorted((out / "sst").glob("kg-*.sst")))
    try:
        return _windows(state, job_file), late
    finally:
        state.close()


def _windows(state: StateBackend, job_file: Path) -> dict[Any, bytes]:
    """The window state: sessions' rows as stored; cells as the rows they hold (a key's
    newest of each window, whatever generations hold it), with their encoded slots."""
    op = backfill_operator(load_job(job_file), None)
    scan = state.scan(b"", b"\xff" * 8)
    stored = {k: v for k, v in scan if struct.unpack_from(">H", k, 2)[0] == op.state_id}
    if not stores_cells(op):
        return stored
    by_group: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for k, v in stored.items():
        by_group.setdefault(k[:4], []).append((k, v))
    return {
        (at[:2], key, end): msgpack.packb(slots)
        for at, group in by_group.items()
        for end, rows in cells.windows_of(group)
        for key, slots in rows
    }


def _streamed(tmp: Path, job_file: Path, events: list[Any], batches: list[int]) -> Any:
    """What the streaming operator stores after the events in ``batches`` (with flushes in
    between, so merged sessions delete their stored ends), and the late records."""
    state = MemoryState()
    try:
        run = run_batches(
            events,
            Spec(bound=BOUND, size=1, lateness=0),
            batches,
            job=load_job(job_file),
            flush_after=[True, False] * 8,
            state=state,
        )
        return _windows(state, job_file), run.late
    finally:
        state.close()


def _events(seed: int) -> list[dict[str, Any]]:
    """Late records (lagging by up to 3 s against a bound of 200 ms), some within lateness."""
    return make_events(1_500, seed=seed, step=20, far_fraction=0.1, far_lag=(300, 3_000))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", [1, 2])
def test_python_path_state_is_byte_identical_to_streaming(
    tmp_path: Path, case: str, seed: int
) -> None:
    events = _events(seed)
    src = write_events(tmp_path / "history.jsonl", events)
    job_file = _job(tmp_path, case)
    want, late = _streamed(tmp_path, job_file, events, [1, 97, 400, 3, 250])
    assert len(late) >= 20  # late records, which both must leave out alike
    got, counted = _backfill(tmp_path, job_file, src)
    assert len(want) > 50 and got == want
    assert counted == len(late)


def test_sessions_merge_and_late_records_extend_no_closed_session(tmp_path: Path) -> None:
    """The cases that make a ``groupBy`` over event time wrong, present in the events above:
    records that bridge two sessions (the UDA counts the merge), and late records that would
    have extended a session whose lateness had passed."""
    events = _events(1)
    job_file = _job(tmp_path, "session-uda")
    run = run_batches(events, Spec(bound=BOUND, size=1, lateness=0), [500],
                      job=load_job(job_file))  # fmt: skip
    finals = [r for r in run.results if r["final"]]
    assert sum(1 for r in finals if r["trail"]["merges"] > 0) >= 5
    extending = [
        x for x in run.late
        if any(f["key"] == x["key"] and x["ts"] < f["end"] and x["ts"] + 150 > f["start"]
               for f in finals)
    ]  # fmt: skip
    assert len(extending) >= 20


def test_from_to_keeps_the_sessions_whose_records_all_lie_in_the_range(tmp_path: Path) -> None:
    events = _events(2)
    src = write_events(tmp_path / "history.jsonl", events)
    job_file = _job(tmp_path, "session-uda")
    every, _ = _backfill(tmp_path, job_file, src)
    lo, hi = 2_000, 9_000
    kept, _ = _backfill(tmp_path, job_file, src, from_ms=lo, to_ms=hi)

    def inside(k: bytes, v: bytes) -> bool:
        return lo <= decode_session(v)[0] and decode_state_key(k)[3] - 150 < hi

    want = {k: v for k, v in every.items() if inside(k, v)}
    assert 10 < len(want) < len(every) and kept == want


def test_sessions_and_udas_take_the_python_path_builtins_stay_native(tmp_path: Path) -> None:
    path = {case: python_path(backfill_operator(load_job(_job(tmp_path, case)), None))
            for case in CASES}  # fmt: skip
    assert all(path.values())
    native = tmp_path / "native.py"
    native.write_text(uda_job_text("windows.sliding(size_ms=1000, slide_ms=300)", 0, BUILTINS))
    op = backfill_operator(load_job(native), None)
    assert not any(isinstance(a, UserDefined) for a in op.aggregates.values())
    assert python_path(op) is False


def test_processing_time_is_refused_naming_the_operator(tmp_path: Path) -> None:
    job = tmp_path / "pt.py"
    job.write_text(uda_job_text("windows.session(gap_ms=10, time='processing')", 0, BUILTINS))
    with pytest.raises(JobDefinitionError, match="operator 'imps' uses processing time"):
        backfill_operator(load_job(job), None)
