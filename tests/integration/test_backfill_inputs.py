"""The backfill's inputs on one real local SparkSession (started once for the module): the same
events as JSONL, Parquet and CSV, and a Kafka topic through the ``weir-kafka`` Python data
source, give the windows ``weir run`` computes when it streams them; offset ranges and
``metadata=true`` read exactly what they name; bad inputs are errors naming them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.csv as pcsv  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from tests.support import (
    WeirResult,
    job_text,
    make_events,
    read_jsonl,
    stored_windows,
    write_events,
)
from tests.support.kafka_broker import create_topic, send
from tests.support.reference import group_emissions
from weir.base.errors import SourceError
from weir.engine.runtime.loader import load_job
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.backfill import BackfillResult, backfill_operator, run_backfill
from weir.state.rocksdb import RocksState

SIZE, BOUND, LATENESS = 1_000, 200, 1_500
AGGS = ("count", "total", "lo", "hi", "avg")
Windows = dict[tuple[str, int, int], dict[str, Any]]


def _backfill(spark: Any, job: Path, inputs: list[str], out: Path) -> BackfillResult:
    return run_backfill(job, inputs, out, master="local[2]", progress=False, session=spark)


def _sst_windows(result: BackfillResult, job_file: Path, db: Path) -> Windows:
    """The windows the backfill's SST files hold, read back as the API would answer them."""
    op = backfill_operator(load_job(job_file), None)
    plan = FoldPlan(op.aggregates)
    state = RocksState(db)
    state.ingest(sorted(Path(result.sst_dir).glob("kg-*.sst")))
    got: Windows = {}
    for key, _, end, slots in stored_windows(state.scan(b"", b"\xff" * 8), op.state_id):
        w = plan.result(key.decode(), end - SIZE, end, slots, True)
        got[(w["key"], w["start"], w["end"])] = {a: w[a] for a in AGGS}
    state.close()
    return got


def _stream(
    run_weir: Callable[..., WeirResult], job: Path, tmp: Path, *flags: str
) -> tuple[Windows, int, int]:
    """``weir run`` to the end of its source: the last emission of each window, late and dead
    record counts."""
    out, state = tmp / "stream-out.jsonl", tmp / "stream-state"
    r = run_weir("run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(state), *flags)  # fmt: skip
    assert r.rc == 0, r.stderr
    last = {k: {a: v[-1][a] for a in AGGS} for k, v in group_emissions(read_jsonl(out)).items()}
    late = len(read_jsonl(state / "t1" / "late.jsonl"))
    dead = len(read_jsonl(state / "t1" / "dead-letter.jsonl"))
    return last, late, dead


def test_jsonl_parquet_and_csv_backfill_to_the_windows_streaming_computes(
    tmp_path: Path, run_weir: Callable[..., WeirResult], spark: Any
) -> None:
    events = make_events(3_000, seed=81)
    events[100] = dict(events[100], ts=None)  # no timestamp
    events[200] = dict(events[200], event="impression", value=None)  # nothing to sum
    jsonl = write_events(tmp_path / "history.jsonl", events)
    job = tmp_path / "job.py"
    job.write_text(job_text(jsonl, bound=BOUND, size=SIZE, lateness=LATENESS))
    streamed, late, dead = _stream(run_weir, job, tmp_path)
    assert late >= 20 and dead == 2  # late and dead records, which every format leaves out alike

    # one type per column: the int key 17 becomes "17", which is the same key
    table = pa.Table.from_pylist([dict(e, id=str(e["id"])) for e in events])
    pcsv.write_csv(table, tmp_path / "history.csv")
    ts_at = table.schema.get_field_index("ts")
    as_time = table.set_column(ts_at, "ts", table["ts"].cast(pa.timestamp("ms")))
    pq.write_table(as_time, tmp_path / "history.parquet", row_group_size=256)

    for name in ("history.jsonl", "history.parquet", "history.csv"):
        r = _backfill(spark, job, [str(tmp_path / name)], tmp_path / f"out-{name}")
        assert (r.late, r.dead, r.splits, r.files) == (late, 2, 1, 1), name
        assert _sst_windows(r, job, tmp_path / f"db-{name}") == streamed, name


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    create_topic(bootstrap, name, partitions)
    return name


def _send_none(bootstrap: str, topic: str) -> None:
    """A record without a value (a tombstone)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    producer.send(topic, key=b"gone", value=None, partition=0)
    producer.flush(30)
    producer.close(10)


def test_a_kafka_backfill_equals_streaming_the_topics(
    tmp_path: Path, run_weir: Callable[..., WeirResult], spark: Any, kafka_broker: str
) -> None:
    """One partition with late records (one split: exactly streaming's lateness), and three
    partitions of other keys out of order within the bound, in one backfill of both topics."""
    late_topic = _topic(kafka_broker, "bf-late", 1)
    events = make_events(3_000, seed=61)
    send(kafka_broker, late_topic, [(0, e) for e in events[:1_500]] + [(0, b"not json")])
    _send_none(kafka_broker, late_topic)
    send(kafka_broker, late_topic, [(0, e) for e in events[1_500:]])
    wide_topic = _topic(kafka_broker, "bf-wide", 3)
    keys, weights = ("w-0", "w-1", "w-2", "w-3"), (4, 3, 2, 1)
    send(kafka_broker, wide_topic, [
        (p, e) for p in range(3)
        for e in make_events(800, seed=70 + p, jitter=150, far_fraction=0.0, keys=keys,
                             weights=weights)
    ])  # fmt: skip
    job = tmp_path / "job.py"
    job.write_text(job_text(Path("unused.jsonl"), bound=BOUND, size=SIZE, lateness=LATENESS))
    expected: Windows = {}
    lates, deads = 0, 0
    for topic in (late_topic, wide_topic):
        source = f"kafka://{kafka_broker}/{topic}?end=latest"
        streamed, late, dead = _stream(run_weir, job, tmp_path / topic, "--source", source)
        assert not expected.keys() & streamed.keys()
        expected |= streamed
        lates, deads = lates + late, deads + dead
    assert lates >= 20 and deads == 2  # the non-JSON value and the tombstone

    urls = [f"kafka://{kafka_broker}/{late_topic}", f"kafka://{kafka_broker}/{wide_topic}"]
    r = _backfill(spark, job, urls, tmp_path / "out")
    assert (r.late, r.dead, r.splits, r.files) == (lates, deads, 4, 0)
    assert r.kafka == {f"{late_topic}/0": [0, 3_002]} | {
        f"{wide_topic}/{p}": [0, 800] for p in range(3)
    }
    assert _sst_windows(r, job, tmp_path / "db") == expected


META_JOB = """from weir import Job, WatermarkStrategy, agg, sources, windows

job = Job("t1", max_parallelism=128)
(
    job.source(
        sources.kafka("unused:9092", "unused", metadata=True),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms={bound}),
    )
    .filter(lambda e: e["event"] == "impression" and e["_kafka"]["offset"] >= 0)
    .key_by(lambda e: e["_kafka"]["key"])
    .window(windows.tumbling(ms={size}), allowed_lateness_ms={lateness})
    .aggregate("imps", {aggs})
)
"""


def test_kafka_offset_ranges_and_metadata_read_exactly_what_they_name(
    tmp_path: Path, spark: Any, kafka_broker: str
) -> None:
    """``from=0:100,1:250&to=0:600`` equals JSONL files of exactly those records; the job's
    Kafka source has ``metadata=True``, so the records carry ``_kafka`` and are keyed by the
    Kafka record key."""
    from tests.support.reference import AGGREGATES_SRC

    topic = _topic(kafka_broker, "bf-range", 2)
    parts = [make_events(1_000, seed=90 + p) for p in range(2)]
    send(kafka_broker, topic, [(p, e) for p in range(2) for e in parts[p]])
    meta_job = tmp_path / "meta_job.py"
    meta_job.write_text(META_JOB.format(bound=BOUND, size=SIZE, lateness=LATENESS,
                                        aggs=AGGREGATES_SRC))  # fmt: skip
    url = f"kafka://{kafka_broker}/{topic}?from=0:100,1:250&to=0:600"
    r = _backfill(spark, meta_job, [url], tmp_path / "out-kafka")
    assert r.kafka == {f"{topic}/0": [100, 600], f"{topic}/1": [250, 1_000]}
    assert r.splits == 2 and r.dead == 0

    files = [write_events(tmp_path / "p0.jsonl", parts[0][100:600]),
             write_events(tmp_path / "p1.jsonl", parts[1][250:])]  # fmt: skip
    job = tmp_path / "job.py"
    job.write_text(job_text(files[0], bound=BOUND, size=SIZE, lateness=LATENESS))
    want = _backfill(spark, job, [str(f) for f in files], tmp_path / "out-files")
    assert r.late == want.late and r.windows == want.windows > 0
    assert _sst_windows(r, meta_job, tmp_path / "db-kafka") == _sst_windows(
        want, job, tmp_path / "db-files"
    )


def test_a_file_a_task_cannot_read_fails_the_backfill_naming_it(tmp_path: Path, spark: Any) -> None:
    good = write_events(tmp_path / "good.jsonl", make_events(100, seed=5))
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,ts,value\nad-0,1,2\nad-0,2,3,4\n")
    job = tmp_path / "job.py"
    job.write_text(job_text(good, bound=BOUND, size=SIZE, lateness=0))
    with pytest.raises(SourceError, match=r"ragged\.csv: cannot read it as csv \(.*columns"):
        _backfill(spark, job, [str(good), str(ragged)], tmp_path / "out")


def test_unknown_topics_and_partitions_are_clear_errors(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_broker: str
) -> None:
    topic = _topic(kafka_broker, "bf-errors", 2)
    job = tmp_path / "job.py"
    job.write_text(job_text(Path("unused.jsonl"), bound=BOUND, size=SIZE, lateness=0))
    sp = ("--into-savepoint", str(tmp_path / "sp"))
    r = run_weir("backfill", str(job), "--input", f"kafka://{kafka_broker}/no-such-topic", *sp)
    assert r.rc == 1 and "topic 'no-such-topic' does not exist" in r.stderr, r.stderr
    r = run_weir("backfill", str(job), "--input", f"kafka://{kafka_broker}/{topic}?to=0:5,7:9",
                 *sp)  # fmt: skip
    assert r.rc == 2 and f"topic '{topic}' has no partition 7 (it has 0, 1)" in r.stderr, r.stderr
    r = run_weir("backfill", str(job), "--input", f"kafka://{kafka_broker}/{topic}?from=9&to=5",
                 *sp)  # fmt: skip
    assert r.rc == 2 and "from=9 is after to=5 in partition 0" in r.stderr, r.stderr
