"""A plain job's backfill on a real local SparkSession, its JSONL read as columns where the
blocks are clean and line by line where they are not: its SST files hold exactly the windows
streaming computes for the same lines, and it counts the same late records and dead letters
(malformed JSON, non-objects, missing or mistyped fields; an int key and a float value are
records like any other)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from tests.support import stored_windows
from weir import testing
from weir.engine.runtime.loader import load_job
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.backfill import backfill_operator, run_backfill
from weir.engine.spark.columnar import BLOCK_BYTES
from weir.state.rocksdb import RocksState

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("cols", max_parallelism=16)
(
    job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=300))
    .key_by("id")
    .window(windows.sliding(size_ms=2_000, slide_ms=500), allowed_lateness_ms=400)
    .aggregate("w", n=agg.count(), total=agg.sum("value"), hi=agg.max("value"))
)
"""
ODD = [
    b"{oops",
    b"",
    b"[1, 2]",
    b'{"id":"a","ts":5,"value":1,"x":NaN}',
    b'{"id":"a","ts":5,"value":1,"x":1e999}',
    b'{"id":"a","ts":5,"value":1} {"id":"b","ts":5,"value":1}',
    b'{"id":7,"ts":100,"value":2}',
    b'{"id":"a","ts":100,"value":2.5}',
    b'{"id":"a","ts":100.0,"value":2}',
    b'{"id":"a","ts":100}',
    b'{"id":"a","value":1}',
    b'{"id":"a","ts":100,"value":"1"}',
]


def _lines(seed: int, n: int, odd_at: set[int]) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i in odd_at:  # a stretch of odd lines: its block goes line by line
            out += [rng.choice(ODD) for _ in range(40)]
        lag = rng.randrange(1_000, 4_000) if rng.random() < 0.03 else rng.randrange(0, 350)
        key = f"f{seed}-k{rng.randrange(300)}"  # a file's own keys: its windows are its own
        rec = {"id": key, "ts": i * 3 - lag, "value": rng.randrange(-9, 99),
               "pad": "p" * rng.randrange(0, 60)}  # fmt: skip
        out.append(orjson.dumps(rec))
    return out


def _sst_windows(sst_dir: str, job_file: Path, db: Path) -> dict[tuple[str, int, int], Any]:
    op = backfill_operator(load_job(job_file), None)
    plan = FoldPlan(op.aggregates)
    state = RocksState(db)
    state.ingest(sorted(Path(sst_dir).glob("kg-*.sst")))
    got = {}
    for key, _, end, slots in stored_windows(state.scan(b"", b"\xff" * 8), op.state_id):
        w = plan.result(key.decode(), op.assigner.start_of(end), end, slots, True)
        got[(w["key"], w["start"], w["end"])] = (w["n"], w["total"], w["hi"])
    state.close()
    return got


def test_a_plain_jobs_backfill_read_as_columns_equals_streaming(tmp_path: Path, spark: Any) -> None:
    files = []
    decoded: list[list[Any]] = []
    # the first file's middle block has odd lines, its others and the second file none
    for i, (n, odd_at) in enumerate([(130_000, {60_000, 61_000}), (10_000, set())]):
        lines = _lines(i, n, odd_at)
        assert i or sum(map(len, lines)) > 2 * BLOCK_BYTES  # three blocks
        path = tmp_path / f"in-{i}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        files.append(str(path))
        recs = []
        for line in lines:
            try:
                recs.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                recs.append(None if line.strip() else "blank")
        decoded.append(recs)
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB)

    want: dict[tuple[str, int, int], Any] = {}
    late = dead = 0
    for recs in decoded:  # one file is one split: streamed alone, its windows are its own
        ran = testing.run(load_job(job_file), [r for r in recs if r is not None and r != "blank"])
        late += len(ran.late)
        dead += len(ran.dead) + sum(1 for r in recs if r is None)
        for r in ran.results:
            if r["final"]:
                want[(r["key"], r["start"], r["end"])] = (r["n"], r["total"], r["hi"])
    assert late > 100 and dead > 20

    result = run_backfill(
        job_file, files, tmp_path / "out", master="local[2]", progress=False, session=spark
    )
    assert (result.late, result.dead) == (late, dead)
    got = _sst_windows(result.sst_dir, job_file, tmp_path / "db")
    assert len(got) > 1_000 and got == want
