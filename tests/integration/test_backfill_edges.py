"""The Spark backfill at both edges of the signed 64-bit event-time range, with window offsets
and dynamic session gaps: its SST files hold exactly the windows streaming computes for the same
events (Spark only groups by the window ends the engine's own assigner computed, so no Spark long
arithmetic can wrap), and ``--from``/``--to`` is refused for dynamic gaps, naming them."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.support import write_lines
from weir import testing
from weir.base.errors import ConfigError
from weir.engine.runtime.loader import load_job
from weir.engine.runtime.stored.codec import decode_session
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.backfill import backfill_operator, run_backfill
from weir.engine.windows import MAX_TIME, MIN_TIME, SessionWindows
from weir.state import cells
from weir.state.layout import decode_state_key
from weir.state.rocksdb import RocksState

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows

job = Job("edges", max_parallelism=16)
(
    job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5))
    .key_by("id")
    .window(ASSIGNER, allowed_lateness_ms=2 ** 62)
    .aggregate("w", n=agg.count(), total=agg.sum("value"))
)
"""
ASSIGNERS = {
    "sliding-offset": "windows.sliding(size_ms=10, slide_ms=4, offset_ms=1)",
    "tumbling-offset": "windows.tumbling(ms=7, offset_ms=-3)",
    "dynamic-session": "windows.dynamic_session(lambda r: r['gap'])",
}


def _events() -> list[dict[str, Any]]:
    near_min = [MIN_TIME + d for d in (0, 3, 1, 9, 20, 2)]
    near_max = [MAX_TIME - d for d in (30, 12, 3, 0, 15, 1, 0)]
    events = [
        {"id": "ab"[i % 2], "ts": t, "value": i, "gap": 1 + i % 6}
        for i, t in enumerate(near_min + near_max)
    ]
    return [*events, {"id": "a", "ts": MAX_TIME - 2, "value": 1, "gap": 0}]  # dead for sessions


def _sst_windows(sst_dir: str, job_file: Path, db: Path) -> dict[tuple[str, int, int], Any]:
    op = backfill_operator(load_job(job_file), None)
    plan = FoldPlan(op.aggregates)
    state = RocksState(db)
    state.ingest(sorted(Path(sst_dir).glob("kg-*.sst")))
    got = {}
    windows: list[tuple[bytes, int, int, list[Any]]] = []
    by_cell: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for k, v in state.scan(b"", b"\xff" * 8):
        if struct.unpack_from(">H", k, 2)[0] != op.state_id:
            continue  # a cleanup timer
        if isinstance(op.assigner, SessionWindows):  # a row, its start stored with it
            _, _, key, end = decode_state_key(k)
            start, slots = decode_session(v)
            windows.append((key, start, end, slots))
        else:  # a cell's generation (fine or coarse), merged a key group at a time
            by_cell.setdefault(k[:4], []).append((k, v))
    for group in by_cell.values():
        assert not isinstance(op.assigner, SessionWindows)  # sessions are rows
        for end, rows in cells.windows_of(group):
            for key, slots in rows:
                windows.append((key, op.assigner.start_of(end), end, slots))
    for key, start, end, slots in windows:
        w = plan.result(key.decode(), start, end, slots, True)
        got[(w["key"], w["start"], w["end"])] = (w["n"], w["total"])
    state.close()
    return got


@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_a_backfill_at_the_edges_of_time_equals_streaming(
    tmp_path: Path, spark: Any, kind: str
) -> None:
    events = _events()
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(e) for e in events])
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB.replace("ASSIGNER", ASSIGNERS[kind]), encoding="utf-8")
    ran = testing.run(load_job(job_file), events)
    streamed = ran.results
    dead = 1 if kind == "dynamic-session" else 0  # the gap 0
    assert len(ran.dead) == dead
    # every window's final emission (the clamped cleanup time makes the final watermark
    # finalize even lateness 2**62); a session merged into a later one has none
    want = {(r["key"], r["start"], r["end"]): (r["n"], r["total"]) for r in streamed if r["final"]}
    assert any(e == MAX_TIME for _, _, e in want) and any(s == MIN_TIME for _, s, _ in want)

    result = run_backfill(
        job_file, [str(src)], tmp_path / "out", master="local[2]", progress=False, session=spark
    )
    assert (result.late, result.dead) == (0, dead)
    assert result.max_end == MAX_TIME
    assert _sst_windows(result.sst_dir, job_file, tmp_path / "db") == want

    if kind == "dynamic-session":
        with pytest.raises(ConfigError, match=r"'w' has dynamic session gaps: a backfill cannot"):
            run_backfill(job_file, [str(src)], tmp_path / "cut", progress=False, session=spark,
                         from_ms=0)  # fmt: skip
