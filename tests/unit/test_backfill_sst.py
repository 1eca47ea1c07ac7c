"""The backfill's native SST writer (``engine/spark/sst.py``): Spark's aggregate columns become
exactly the state streaming keeps (window cells, ``state/cells.py``), read back through
RocksDB."""

from __future__ import annotations

from pathlib import Path

import msgpack
from rocksdict import Options, Rdict

from weir.engine.job import operator_state_id
from weir.engine.spark.plan import Plan
from weir.engine.spark.sst import write_ssts
from weir.state import cells, layout
from weir.state.keygroups import key_group

JOB = """
from weir import Job, agg, sources, windows
job = Job("sst")
(job.source(sources.jsonl("unused.jsonl")).key_by("id").window(windows.tumbling(ms=10))
    .aggregate("stats", n=agg.count(), total=agg.sum("v"), m=agg.mean("v"), lo=agg.min("v")))
"""


def test_aggregate_columns_become_the_streaming_state_and_its_cleanup_timers(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    out = tmp_path / "out"
    for sub in ("sst", "stats", "errors"):
        (out / sub).mkdir(parents=True)
    keys = ["a", "b", "a"]
    cols = {
        "kg": [key_group(k, 8) for k in keys],
        "key": keys,
        "end": [10, 10, -(2**63) + 10],
        "n": [2, 1, 3],
        "sum__v": [5.0, 2.5, 9.0],
        "min__v": [1.0, 2.5, 3.0],
        "max__v": [4.0, 2.5, 3.0],
        "v__allint": [True, False, True],
    }
    written = write_ssts(Plan(str(job), "sst", "stats", 8, None, None, str(out)), cols)
    assert sum(w["windows"] for w in written) == 3
    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    db.ingest_external_file(sorted(str(p) for p in (out / "sst").glob("*.sst")))
    items = dict(db.items())
    db.close()
    sid = operator_state_id("stats")

    def window(k: str, end: int) -> list[object]:
        def scan(lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
            return sorted(i for i in items.items() if lo <= i[0] < hi)

        bucket = cells.key_entries(scan, key_group(k, 8), sid, k.encode())
        return cells.key_windows(bucket, k.encode())[end]

    # ints stay ints when every value was one (as the streaming fold keeps them); mean is
    # [sum, count]; the far edge of event time encodes like any other end
    assert window("a", 10) == [2, 5, 5, 2, 1]
    assert window("b", 10) == [1, 2.5, 2.5, 1, 2.5]
    assert window("a", -(2**63) + 10) == [3, 9, 9, 3, 3]
    # a cleanup timer per key group and end lists its keys, as WindowRuntime writes them
    timers: dict[int, list[str]] = {}
    for k, v in items.items():
        if int.from_bytes(k[2:4], "big") == sid | 0x8000:  # kg (2 bytes), then the state id
            timers.setdefault(layout.decode_timer_key(k)[2], []).extend(msgpack.unpackb(v))
    assert {end: sorted(ks) for end, ks in timers.items()} == {10: ["a", "b"], -(2**63) + 10: ["a"]}
