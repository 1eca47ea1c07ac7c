"""A job written with expressions (filter, with_columns, key, event time and aggregate inputs)
backfilled on a real local SparkSession: its SST files hold exactly the windows streaming
computes for the same lines (``weir.testing``, the per-record path), with the same late records
and the same dead letters (a division by zero, a NULL key or time, a string where a number
goes), on the native aggregation path and on the Python one (sessions)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support import stored_windows
from weir import testing
from weir.engine.runtime.loader import load_job
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.backfill import backfill_operator, run_backfill
from weir.engine.windows import SessionWindows
from weir.state.rocksdb import RocksState

JOB = """
from weir import Job, WatermarkStrategy, agg, col, sources, when, windows
job = Job("exprs", max_parallelism=16)
(
    job.source(sources.jsonl("unused.jsonl"), timestamp=col("t") * 10,
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=300))
    .filter((col("event") == "impression") & (col("value") // col("div") >= 0))
    .with_columns(net=col("value") - col("fee").fill_null(0), tag="x")
    .key_by(col("id").cast(str))
    .window(ASSIGNER, allowed_lateness_ms=200)
    .aggregate("w", n=agg.count(), users=agg.count(col("user")), net=agg.sum(col("net") * 2),
               hi=agg.max(when(col("net") > 50).then(col("net")).otherwise(0)),
               avg=agg.mean(col("value") / 4))
)
"""
ASSIGNERS = {
    "tumbling": "windows.tumbling(ms=1_000)",
    "session": "windows.session(gap_ms=150)",
}


def _events(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        lag = rng.randrange(100, 400) if rng.random() < 0.05 else rng.randrange(0, 30)
        rec: dict[str, Any] = {
            "id": rng.randrange(40), "t": i - lag, "value": rng.randrange(-20, 100),
            "div": rng.choice([1, 2, 3, 7]), "event": rng.choice(["impression", "click"]),
        }  # fmt: skip
        if rng.random() < 0.3:
            rec["fee"] = rng.randrange(0, 5)
        if rng.random() < 0.6:
            rec["user"] = f"u{rng.randrange(9)}"
        odd = rng.random()
        if odd < 0.01:
            rec["div"] = 0  # filter: division by zero
        elif odd < 0.02:
            del rec["id"]  # key: NULL
        elif odd < 0.03:
            rec["t"] = None  # event time: NULL
        elif odd < 0.04:
            rec["fee"] = "free"  # with_columns: str - int
        elif odd < 0.05:
            rec["value"] = 2.5  # a float: 2.5 // div is fine, and the sum turns float
        out.append(rec)
    return out


def _sst_windows(sst_dir: str, job_file: Path, db: Path) -> dict[tuple[str, int, int], Any]:
    op = backfill_operator(load_job(job_file), None)
    plan = FoldPlan(op.aggregates, op.name)  # records as the operator emits them
    state = RocksState(db)
    state.ingest(sorted(Path(sst_dir).glob("kg-*.sst")))
    got = {}
    sessions = isinstance(op.assigner, SessionWindows)  # sessions are rows, windows cells
    for key, begin, end, slots in stored_windows(
        state.scan(b"", b"\xff" * 8), op.state_id, sessions
    ):
        start = op.assigner.start_of(end) if begin is None else begin
        w = plan.result(key.decode(), start, end, slots, True)
        got[(w["key"], w["start"], w["end"])] = w
    state.close()
    return got


@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_an_expression_jobs_backfill_equals_streaming(
    tmp_path: Path, spark: Any, kind: str
) -> None:
    events = _events(3, 4_000)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB.replace("ASSIGNER", ASSIGNERS[kind]))

    ran = testing.run(load_job(job_file), events)
    stages = {d["stage"] for d in ran.dead}
    assert stages == {"filter", "key_by", "timestamp", "with_columns"}, stages
    assert len(ran.late) > 20
    want = {(r["key"], r["start"], r["end"]): r for r in ran.results if r["final"]}
    for w in want.values():
        del w["final"]

    result = run_backfill(
        job_file, [str(src)], tmp_path / "out", master="local[2]", progress=False, session=spark
    )
    assert (result.late, result.dead) == (len(ran.late), len(ran.dead))
    letters = [orjson.loads(line) for f in (tmp_path / "out").rglob("dead-*.jsonl")
               for line in f.read_bytes().splitlines()]  # fmt: skip
    reasons = sorted((d["stage"], d["reason"]) for d in ran.dead)
    assert sorted((d["stage"], d["reason"]) for d in letters) == reasons
    got = _sst_windows(result.sst_dir, job_file, tmp_path / "db")
    for w in got.values():
        del w["final"]
    assert len(got) > 100 and got == want
    assert any(type(w["net"]) is float for w in got.values())  # a float input came through
    assert any(w["users"] != w["n"] for w in got.values())  # count(expr) skipped NULLs
