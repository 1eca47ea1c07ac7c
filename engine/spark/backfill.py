"""Backfill on Spark: the same job definition as a batch, its windows written as SST files in
weir's state layout, then loaded into a savepoint or into a running job.

The plan (this module drives it):

1. **Per split, in Python** (``engine/spark/pairs.py``): one task per input file (``mapInArrow``
   over a DataFrame of paths, ``engine/spark/inputs.py`` reading JSONL, Parquet or CSV) and one
   per Kafka partition (``mapInArrow`` over the ``weir-kafka`` Python data source,
   ``engine/spark/kafka_source.py``). The engine's own chain runs the job's steps and gives each
   record its split's watermark, and the streaming lateness rule keeps the ``(record, window)``
   pairs. They leave as Arrow columns: key group, key, window end, the aggregated fields.
2. **Native Spark** (built-in aggregates on tumbling and sliding windows):
   ``groupBy(key group, key, end)`` with ``count``/``sum``/``min``/``max``, and ``repartition``
   by key group. **Python path** (sessions, user-defined aggregates): the pairs carry their
   record, event time, watermark and position in the split; ``repartition`` by key group and
   ``sortWithinPartitions`` by ``(key group, key, end, watermark, split, position)``:
   streaming's order.
3. **Per key group, in Python** (``engine/spark/sst.py``): state keys and values as streaming
   stores them, written with rocksdict's ``SstFileWriter``: one SST file per key group. On the
   Python path the same task folds each window with the streaming fold (``folds.py``), or
   merges each key's sessions with the streaming session operator (``sessions.py``), which also
   decides which session records are late.

Lateness over history: one input file is one split, as in ``weir run``, and so is one Kafka
partition, so a record is late when its window's end - 1 + allowed lateness is at or before the
watermark that the records *before it in the same split* produced (for sessions: the end of the
session it would join). ``--from``/``--to`` select events by event time *after* that decision,
so the watermarks are those of the whole split; for sessions they keep the sessions whose
records all lie in the range. Records that are malformed, lack a timestamp or an aggregated
field are counted as dead letters and left out, as in streaming.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.base.errors import ConfigError, SourceError
from weir.engine.job import Job
from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.inputs import BackfillInputs, FileInput, KafkaInput, resolve_inputs
from weir.engine.spark.output import BackfillOutput
from weir.engine.spark.pairs import pairs_of_file, pairs_of_kafka
from weir.engine.spark.plan import Plan, backfill_operator, python_path
from weir.engine.spark.sst import python_ssts, write_ssts
from weir.engine.windows import SessionWindows

__all__ = ["BackfillResult", "backfill_operator", "run_backfill", "spark_session"]


@dataclass
class BackfillResult:
    op: str
    files: int
    windows: int
    late: int
    dead: int
    watermark: int | None
    min_end: int | None
    max_end: int | None
    sst_dir: str
    seconds: float
    compute_seconds: float = 0.0  # without Spark's start-up
    splits: int = 0  # files and Kafka partitions read
    kafka: dict[str, list[int]] = field(default_factory=dict)  # "topic/p" -> [from, to)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def spark_session(master: str, app: str = "weir-backfill") -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from weir.engine.runtime.control.sparkstart import get_or_create

    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        # weir backfill shows its own progress (app/progress.py); Spark's console bar would
        # write carriage returns even into log files
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20000")
    )
    with no_pandas_notice():  # PySpark's start-up checks the pandas version too
        return get_or_create(builder)


def run_backfill(
    job_file: Path,
    inputs: list[str] | BackfillInputs,
    out_dir: Path | str,
    *,
    fmt: str | None = None,
    op_name: str | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    master: str = "local[*]",
    progress: bool = True,
    session: Any = None,
) -> BackfillResult:
    """Compute the operator's windows over ``inputs`` (``--input`` values, resolved here, or
    ``resolve_inputs``'s answer; see ``engine.spark.inputs``) and write them as SST files under
    ``out_dir/sst`` (one per key group; ``out_dir`` a directory or ``s3://BUCKET/PREFIX``, see
    ``output.py``), listed in ``sst/files.json`` with their CRC-32. ``session``: a
    SparkSession to use and leave running (else one is started and stopped)."""
    from weir.engine.runtime.loader import load_job as load_job_file

    t0 = time.monotonic()
    job = load_job_file(job_file)
    op = backfill_operator(job, op_name)
    _check_range(op, from_ms, to_ms)
    if not isinstance(inputs, BackfillInputs):
        inputs = resolve_inputs(inputs, fmt, job)  # Kafka offsets are fixed here
    files, kafka = inputs.files, inputs.kafka
    out = BackfillOutput(out_dir)
    out.clear()
    plan = Plan(
        str(job_file.resolve()), job.name, op.name, job.max_parallelism, from_ms, to_ms,
        out.url, out.task_env(),
    )  # fmt: skip
    spark = session or spark_session(master)
    t_started = time.monotonic()
    if not progress:
        spark.sparkContext.setLogLevel("ERROR")
    try:
        with no_pandas_notice():
            windows = _aggregated(spark, plan, op, files, kafka)
            written = _write_ssts(plan, op, windows)
        compute_s = time.monotonic() - t_started
    except Exception:
        reported = out.texts("errors")
        if reported:  # an input a task could not read: its message, not Spark's traceback
            raise SourceError(reported[0]) from None
        raise
    finally:
        if session is None:
            spark.stop()
    out.write_manifest(written)
    stats = [json.loads(t) for t in out.texts("stats")]
    unread = sorted({f.path for f in files} - {s["split"] for s in stats})
    if unread:
        raise SourceError(f"the backfill did not read {len(unread)} input files: {unread[0]} …")
    result = _result(job, op, written, stats, out.sst_url, kafka)
    result.files = len(files)
    result.seconds = round(time.monotonic() - t0, 3)
    result.compute_seconds = round(compute_s, 3)
    return result


@contextmanager
def no_pandas_notice() -> Iterator[None]:
    """PySpark's start-up and its ``mapInArrow`` (through ``pandas_udf``) warn
    (``FutureWarning``, from two places, so twice a run) that pandas 3 is not fully
    supported. The backfill hands Spark Arrow batches and never a pandas frame, so the notice
    tells its user nothing; it is silenced here, by its text, and only around the backfill's
    own Spark calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        yield


def _result(
    job: Job,
    op: WindowNode,
    written: list[dict[str, Any]],
    stats: list[dict[str, Any]],
    sst_url: str,
    kafka: list[KafkaInput],
) -> BackfillResult:
    """What the tasks wrote and read, summed (``files`` and the times are the caller's)."""
    ends = [s["max_ts"] for s in stats if s["max_ts"] is not None]
    max_ts = min(ends) if ends else None  # the stream's watermark: the minimum over splits
    bound = job.sources[0].watermarks
    return BackfillResult(
        op=op.name,
        files=0,
        windows=sum(int(w["windows"]) for w in written),
        late=sum(int(s["late"]) for s in stats) + sum(int(w["late"]) for w in written),
        # stage 1's (unreadable, no timestamp, no aggregated field) and, for sessions, those
        # the session operator could not fold: every operator counts a record alike
        dead=sum(int(s["dead"]) for s in stats) + sum(int(w["dead"] or 0) for w in written),
        watermark=None if max_ts is None else bound.watermark_for(int(max_ts)),
        min_end=min((int(w["min_end"]) for w in written if w["windows"]), default=None),
        max_end=max((int(w["max_end"]) for w in written if w["windows"]), default=None),
        sst_dir=sst_url,
        seconds=0.0,
        splits=len(stats),
        kafka={f"{k.topic}/{p}": list(r) for k in kafka for p, r in sorted(k.ranges.items())},
    )


def _check_range(op: WindowNode, from_ms: int | None, to_ms: int | None) -> None:
    """``--from``/``--to`` keep the sessions whose records all lie in the range, which a stored
    session tells only when its gap is fixed (its last record is at ``end - gap``)."""
    if (from_ms is None and to_ms is None) or not isinstance(op.assigner, SessionWindows):
        return
    if op.assigner.dynamic:
        raise ConfigError(
            f"operator {op.name!r} has dynamic session gaps: a backfill cannot cut its sessions "
            "at `from_ms`/`to_ms`; backfill the whole input (filter it beforehand) instead"
        )


def _aggregated(
    spark: Any, plan: Plan, op: WindowNode, files: list[FileInput], kafka: list[KafkaInput]
) -> Any:
    """Stages 1 and 2: every split's pairs (one task per file, one per Kafka partition), then
    Spark's own aggregation by ``(key group, key, window end)``, or, on the Python path, the
    pairs of each key group sorted into streaming's order for the Python fold."""
    import pyarrow as pa  # type: ignore[import-untyped]

    if python_path(op):
        schema = [("kg", pa.int32()), ("key", pa.string()), ("end", pa.int64()),
                  ("ts", pa.int64()), ("wm", pa.int64()), ("split", pa.string()),
                  ("seq", pa.int64()), ("rec", pa.binary())]  # fmt: skip
        ddl = "kg int, key string, end long, ts long, wm long, split string, seq long, rec binary"
    else:
        fields = FoldPlan(op.aggregates).fields  # the fields the streaming fold reads
        schema = [("kg", pa.int32()), ("key", pa.string()), ("end", pa.int64())]
        schema += [c for f in fields for c in ((f, pa.float64()), (f + "__int", pa.bool_()))]
        ddl = ", ".join(
            ["kg int", "key string", "end long"]
            + [c for f in fields for c in (f"`{f}` double", f"`{f}__int` boolean")]
        )
    data = _pairs(spark, plan, files, kafka, pa.schema(schema), ddl)
    if python_path(op):  # streaming's order: by watermark, then split and position in it
        order = ("kg", "key", "end", "wm", "split", "seq")
        return data.repartition("kg").sortWithinPartitions(*order)
    return _native_aggregates(data, FoldPlan(op.aggregates).fields)


def _pairs(
    spark: Any, plan: Plan, files: list[FileInput], kafka: list[KafkaInput], pair_schema: Any,
    ddl: str,
) -> Any:  # fmt: skip
    """Stage 1: one Python task per file and per Kafka partition, their pairs in one frame."""
    import pyarrow as pa

    frames = []
    if files:

        def file_pairs(batches: Iterator[Any]) -> Iterator[Any]:
            for b in batches:
                for path, fmt in zip(b.column("path").to_pylist(), b.column("format").to_pylist(),
                                     strict=True):  # fmt: skip
                    for cols in pairs_of_file(plan, path, fmt):
                        yield pa.RecordBatch.from_pydict(cols, schema=pair_schema)

        paths = spark.createDataFrame(
            [(f.path, f.format) for f in files], "path string, format string"
        )
        frames.append(paths.repartition(len(files)).mapInArrow(file_pairs, ddl))
    for k in kafka:
        if k.splits():
            frames.append(
                _kafka_frame(spark, k).mapInArrow(_kafka_pairs(plan, k, pair_schema), ddl)
            )
    data = frames[0] if frames else spark.createDataFrame([], ddl)
    for other in frames[1:]:
        data = data.union(other)
    return data


def _native_aggregates(data: Any, fields: list[str]) -> Any:
    """Stage 2, native: Spark's aggregates per ``(key group, key, window end)``."""
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n")]
    for f in fields:
        aggs += [
            F.sum(f).alias(f"sum__{f}"),
            F.min(f).alias(f"min__{f}"),
            F.max(f).alias(f"max__{f}"),
            F.count(f).alias(f"count__{f}"),  # the non-NULL values (SQL's COUNT(f))
            F.min(F.col(f"{f}__int").cast("int")).cast("boolean").alias(f"{f}__allint"),
        ]
    return data.groupBy("kg", "key", "end").agg(*aggs).repartition("kg")


def _kafka_frame(spark: Any, k: KafkaInput) -> Any:
    """The ``weir-kafka`` data source over ``k``'s fixed ranges: one Spark partition each."""
    from weir.engine.spark.kafka_source import KafkaRangeSource

    spark.dataSource.register(KafkaRangeSource)
    ranges = {str(p): list(r) for p, r in k.ranges.items()}
    # the security settings travel as options: a Spark task must not depend on the driver's
    # environment (the query's plan does not show a Python data source's options)
    return (
        spark.read.format(KafkaRangeSource.name())
        .option("bootstrap", k.bootstrap)
        .option("topic", k.topic)
        .option("ranges", json.dumps(ranges))
        .options(**k.security.options())
        .load()
    )


def _kafka_pairs(plan: Plan, k: KafkaInput, pair_schema: Any) -> Any:
    import pyarrow as pa

    def pairs(batches: Iterator[Any]) -> Iterator[Any]:
        for cols in pairs_of_kafka(plan, k.topic, k.metadata, batches):
            yield pa.RecordBatch.from_pydict(cols, schema=pair_schema)

    return pairs


def _write_ssts(plan: Plan, op: WindowNode, windows: Any) -> list[Any]:
    """Stage 3: one SST file per key group, written by the task that holds the key group (on
    the Python path, that task folds its windows first)."""
    import pyarrow as pa

    out_schema = (
        "kg int, path string, size long, crc32 long, windows long, min_end long, max_end long, "
        "late long, dead long"
    )
    written_schema = pa.schema(
        [
            ("kg", pa.int32()),
            ("path", pa.string()),
            ("size", pa.int64()),
            ("crc32", pa.int64()),
            ("windows", pa.int64()),
            ("min_end", pa.int64()),
            ("max_end", pa.int64()),
            ("late", pa.int64()),
            ("dead", pa.int64()),
        ]
    )

    def ssts(batches: Iterator[Any]) -> Iterator[Any]:
        cols: dict[str, list[Any]] = {}
        for b in batches:
            for name, values in b.to_pydict().items():
                cols.setdefault(name, []).extend(values)
        if cols.get("kg"):
            yield pa.RecordBatch.from_pylist(write_ssts(plan, cols), schema=written_schema)

    def python(batches: Iterator[Any]) -> Iterator[Any]:
        written = list(python_ssts(plan, batches))
        if written:
            yield pa.RecordBatch.from_pylist(written, schema=written_schema)

    fn = python if python_path(op) else ssts
    done: list[Any] = windows.mapInArrow(fn, out_schema).collect()
    return done
