"""Backfill on Spark: the same job definition as a batch, its windows written as SST files in
weir's state layout, then loaded into a savepoint or into a running job.

The plan:

1. **Per input file, in Python** (``mapInArrow`` over a DataFrame of file paths, one task per
   file): the engine's own chain decodes the lines, takes timestamps, runs the job's
   map/filter/flat_map steps and key selector, and computes each record's watermark exactly as a
   streaming split does (max event time so far in the file, minus the bound, minus 1). Each
   ``(record, window)`` pair is kept when ``end - 1 + allowed_lateness > watermark`` -- the
   streaming rule, so late data is dropped (and counted) the same way. The pairs leave as Arrow
   columns: key group, key, window end, the aggregated fields.
2. **Native Spark**: ``groupBy(key group, key, end)`` with ``count``/``sum``/``min``/``max``, and
   ``repartition`` by key group.
3. **Per key group, in Python** (``mapInArrow``): rows become state keys
   (``kg | state id | len | key | end``) and accumulator slots exactly as the streaming fold
   builds them, plus the cleanup timers, sorted, and written with rocksdict's ``SstFileWriter``:
   one SST file per key group.

Lateness over history: one input file is one split, as in ``weir run``, so a record is late when
its window's end - 1 + allowed lateness is at or before the watermark that the records *before
it in the same file* produced. ``--from``/``--to`` select events by event time *after* that
decision, so the watermarks are those of the whole file. Records that are malformed, lack a
timestamp or an aggregated field are counted as dead letters and left out, as in streaming.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agg import Builtin
from engine.errors import ConfigError, JobDefinitionError
from engine.job import Job, WindowOperator
from engine.runtime.fold import FoldPlan
from engine.windows import SessionWindows

log = logging.getLogger(__name__)

READ_BATCH = 8192


@dataclass(frozen=True)
class Plan:
    """What the Spark tasks need, picklable: the job file is loaded again in each task."""

    job_file: str
    job_name: str
    op: str
    max_parallelism: int
    from_ms: int | None
    to_ms: int | None
    out_dir: str


def backfill_operator(job: Job, op_name: str | None) -> WindowOperator:
    """The window operator a backfill computes, checked for what Spark can run."""
    ops = [o for o in job.operators.values() if isinstance(o, WindowOperator)]
    if op_name is not None:
        ops = [o for o in ops if o.name == op_name]
    if not ops:
        known = ", ".join(job.operators) or "none"
        raise JobDefinitionError(
            f"job {job.name!r} has no window operator {op_name or ''!r} to backfill; "
            f"operators: {known}"
        )
    if len(ops) > 1:
        raise ConfigError(
            f"job {job.name!r} has several window operators ({', '.join(o.name for o in ops)}); "
            "pick one with --op"
        )
    op = ops[0]
    if isinstance(op.assigner, SessionWindows):
        raise JobDefinitionError(
            f"operator {op.name!r} uses session windows; the backfill runs tumbling and sliding "
            "windows"
        )
    if op.assigner.time == "processing":
        raise JobDefinitionError(
            f"operator {op.name!r} uses processing time; a backfill needs event time"
        )
    custom = [n for n, a in op.aggregates.items() if not isinstance(a, Builtin)]
    if custom:
        raise JobDefinitionError(
            f"operator {op.name!r} has user-defined aggregates ({', '.join(custom)}); the "
            "backfill runs the built-in ones (count, sum, min, max, mean) natively on Spark"
        )
    return op


def expand_inputs(inputs: list[str]) -> list[str]:
    files: list[str] = []
    for raw in inputs:
        path = raw.removeprefix("file://")
        found = sorted(glob.glob(path)) if any(c in path for c in "*?[") else [path]
        for f in found:
            if not os.path.isfile(f):
                raise ConfigError(f"--input {raw}: {f} is not a file; pass JSONL files or globs")
            files.append(os.path.abspath(f))
    if not files:
        raise ConfigError(f"--input {' '.join(inputs)} matches no file")
    return files


# -- stage 1: per file, in the executors ---------------------------------------------------------

_JOBS: dict[str, Job] = {}


def _load(job_file: str) -> Job:
    job = _JOBS.get(job_file)
    if job is None:
        from engine.runtime.loader import load_job as load_job_file

        job = _JOBS[job_file] = load_job_file(Path(job_file))
    return job


def pairs_of_file(plan: Plan, path: str) -> Iterator[dict[str, list[Any]]]:
    """The kept ``(record, window)`` pairs of one input file, in column batches; the file's
    counts (late, dead) and max event time go to ``<out_dir>/stats/``."""
    from engine.runtime.chain import Chain, keyby_nodes
    from engine.runtime.outputs import DeadLetters
    from engine.sinks import from_url as sink_from_url
    from engine.sources.file import JsonlSource
    from state.keygroups import key_groups

    job = _load(plan.job_file)
    op = backfill_operator(job, plan.op)
    source = job.sources[0]
    node_index = next(
        i for i, n in enumerate(keyby_nodes(source)) if any(c is op for c in n.children)
    )
    dead = DeadLetters(sink_from_url(f"file://{plan.out_dir}/dead-{os.getpid()}.jsonl"))
    chain = Chain(source, {}, dead)
    fields = FoldPlan(op.aggregates).fields  # the fields the streaming fold reads
    assigner = op.assigner
    assert not isinstance(assigner, SessionWindows)  # refused by backfill_operator
    lateness = op.allowed_lateness_ms
    m = plan.max_parallelism
    lo = plan.from_ms if plan.from_ms is not None else -(1 << 62)
    hi = plan.to_ms if plan.to_ms is not None else 1 << 62
    reader = JsonlSource(Path(path)).open(path)
    late = dead_fields = 0
    max_ts = None
    try:
        while True:
            batch = reader.read_batch(READ_BATCH)
            chain.process(batch, path)
            out: dict[str, list[Any]] = {"kg": [], "key": [], "end": []}
            for f in fields:
                out[f] = []
                out[f + "__int"] = []
            for node, keys, recs, ts, wms in chain.keyed:
                if node != node_index:
                    continue
                ends, origin = assigner.expand(ts)
                idx = origin if origin is not None else range(len(ends))
                kgs = key_groups(keys, m)
                # the streaming rule, per (record, window): kept while the window can change
                on_time = [j for j, i in enumerate(idx) if ends[j] - 1 + lateness > wms[i]]
                late += len(ends) - len(on_time)
                sel = [j for j in on_time if lo <= ts[idx[j]] < hi]
                rows = [idx[j] for j in sel]
                try:
                    cols = [[recs[i][f] for i in rows] for f in fields]
                    if not all(set(map(type, c)) <= {int, float} for c in cols):
                        raise TypeError
                except (KeyError, TypeError, IndexError):
                    sel, rows, cols, bad = _good_fields(sel, rows, recs, fields)
                    dead_fields += bad
                out["kg"] += [kgs[i] for i in rows]
                out["key"] += [keys[i] for i in rows]
                out["end"] += [ends[j] for j in sel]
                for f, col in zip(fields, cols, strict=True):
                    out[f] += list(map(float, col))
                    out[f + "__int"] += [type(v) is int for v in col]
            if batch.items:
                t = chain.max_ts.get(path)
                max_ts = t if t is not None else max_ts
            if out["key"]:
                yield out
            if batch.end:
                break
    finally:
        reader.close()
        dead.close()
    stats = {"path": path, "late": late, "dead": dead.count + dead_fields, "max_ts": max_ts}
    name = hashlib.sha1(path.encode()).hexdigest()  # noqa: S324 - a file name, not security
    Path(plan.out_dir, "stats", f"{name}.json").write_text(json.dumps(stats))


def _good_fields(
    sel: list[int], rows: list[int], recs: list[Any], fields: list[str]
) -> tuple[list[int], list[int], list[list[Any]], int]:
    """The slow path: drop records whose aggregated fields are missing or not numbers."""
    keep_sel: list[int] = []
    keep_rows: list[int] = []
    cols: list[list[Any]] = [[] for _ in fields]
    for j, i in zip(sel, rows, strict=True):
        try:
            vals = [recs[i][f] for f in fields]
        except (KeyError, TypeError, IndexError):
            continue
        if all(type(v) in (int, float) for v in vals):
            keep_sel.append(j)
            keep_rows.append(i)
            for c, v in zip(cols, vals, strict=True):
                c.append(v)
    return keep_sel, keep_rows, cols, len(sel) - len(keep_sel)


# -- stage 3: per key group, SST files ----------------------------------------------------------


def slots_for(op: WindowOperator, row: dict[str, Any]) -> list[Any]:
    """The accumulator slots the streaming fold would hold for these Spark aggregates."""
    slots: list[Any] = []
    for a in op.aggregates.values():
        assert isinstance(a, Builtin)
        if a.kind == "count":
            slots.append(int(row["n"]))
            continue
        all_int = bool(row[f"{a.field}__allint"])
        if a.kind == "mean":  # [sum, count]
            slots += [_number(row[f"sum__{a.field}"], all_int), int(row["n"])]
        else:
            slots.append(_number(row[f"{a.kind}__{a.field}"], all_int))
    return slots


def _number(v: Any, all_int: bool) -> Any:
    """Spark aggregates doubles; the streaming fold keeps ints when every value was one."""
    return int(v) if all_int and float(v).is_integer() else v


def write_ssts(plan: Plan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One SST file per key group in ``rows``: window values and their cleanup timers."""
    import msgpack
    from rocksdict import Options, SstFileWriter

    from state import layout

    job = _load(plan.job_file)
    op = backfill_operator(job, plan.op)
    sid, tsid = op.state_id, op.timer_state_id
    pack = msgpack.Packer().pack
    by_kg: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_kg.setdefault(int(r["kg"]), []).append(r)
    written = []
    seq = time.time_ns()
    for kg, group in sorted(by_kg.items()):
        entries: dict[bytes, bytes] = {}
        timers: dict[int, list[str]] = {}
        for r in group:
            key, end = str(r["key"]), int(r["end"])
            entries[layout.state_key(kg, sid, key.encode(), end)] = pack(slots_for(op, r))
            timers.setdefault(end, []).append(key)
        for end, keys in timers.items():
            entries[layout.timer_key(kg, tsid, end, seq)] = pack(sorted(keys))
        path = os.path.join(plan.out_dir, "sst", f"kg-{kg:05d}.sst")
        writer = SstFileWriter(Options(raw_mode=True))
        writer.open(path)
        for k in sorted(entries):
            writer[k] = entries[k]
        writer.finish()
        ends = list(timers)
        written.append(
            {
                "kg": kg,
                "path": path,
                "windows": len(group),
                "min_end": min(ends),
                "max_end": max(ends),
            }
        )
    return written


# -- the driver ----------------------------------------------------------------------------------


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

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def spark_session(master: str, app: str = "weir-backfill") -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    cores = os.cpu_count() or 2
    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20000")
        .getOrCreate()
    )


def run_backfill(
    job_file: Path,
    inputs: list[str],
    out_dir: Path,
    *,
    op_name: str | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    master: str = "local[*]",
    progress: bool = True,
) -> BackfillResult:
    """Compute the operator's windows over ``inputs`` and write them as SST files under
    ``out_dir/sst`` (one per key group)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyspark.sql import functions as F

    from engine.runtime.loader import load_job as load_job_file

    t0 = time.monotonic()
    job = load_job_file(job_file)
    op = backfill_operator(job, op_name)
    files = expand_inputs(inputs)
    for sub in ("sst", "stats"):
        shutil.rmtree(out_dir / sub, ignore_errors=True)
        (out_dir / sub).mkdir(parents=True)
    plan = Plan(
        str(job_file.resolve()), job.name, op.name, job.max_parallelism, from_ms, to_ms,
        str(out_dir.resolve()),
    )  # fmt: skip
    fields = FoldPlan(op.aggregates).fields  # the fields the streaming fold reads
    pair_schema = pa.schema(
        [("kg", pa.int32()), ("key", pa.string()), ("end", pa.int64())]
        + [c for f in fields for c in ((f, pa.float64()), (f + "__int", pa.bool_()))]
    )
    spark = spark_session(master)
    t_started = time.monotonic()
    if not progress:
        spark.sparkContext.setLogLevel("ERROR")
    try:
        paths = spark.createDataFrame([(f,) for f in files], "path string").repartition(len(files))

        def pairs(batches: Iterator[Any]) -> Iterator[Any]:
            for b in batches:
                for path in b.column("path").to_pylist():
                    for cols in pairs_of_file(plan, path):
                        yield pa.RecordBatch.from_pydict(cols, schema=pair_schema)

        ddl = ", ".join(
            ["kg int", "key string", "end long"]
            + [c for f in fields for c in (f"`{f}` double", f"`{f}__int` boolean")]
        )
        data = paths.mapInArrow(pairs, ddl)
        aggs = [F.count(F.lit(1)).alias("n")]
        for f in fields:
            aggs += [
                F.sum(f).alias(f"sum__{f}"),
                F.min(f).alias(f"min__{f}"),
                F.max(f).alias(f"max__{f}"),
                F.min(F.col(f"{f}__int").cast("int")).cast("boolean").alias(f"{f}__allint"),
            ]
        windows = data.groupBy("kg", "key", "end").agg(*aggs).repartition("kg")
        out_schema = "kg int, path string, windows long, min_end long, max_end long"
        written_schema = pa.schema(
            [
                ("kg", pa.int32()),
                ("path", pa.string()),
                ("windows", pa.int64()),
                ("min_end", pa.int64()),
                ("max_end", pa.int64()),
            ]
        )

        def ssts(batches: Iterator[Any]) -> Iterator[Any]:
            rows: list[dict[str, Any]] = []
            for b in batches:
                rows += b.to_pylist()
            if rows:
                yield pa.RecordBatch.from_pylist(write_ssts(plan, rows), schema=written_schema)

        written = windows.mapInArrow(ssts, out_schema).collect()
        compute_s = time.monotonic() - t_started
    finally:
        spark.stop()
    bound = job.sources[0].watermarks
    stats = [json.loads(p.read_text()) for p in sorted((out_dir / "stats").glob("*.json"))]
    if len(stats) != len(files):
        raise ConfigError(f"the backfill read {len(stats)} of {len(files)} input files")
    ends = [s["max_ts"] for s in stats if s["max_ts"] is not None]
    max_ts = min(ends) if ends else None  # the stream's watermark: the minimum over splits
    return BackfillResult(
        op=op.name,
        files=len(files),
        windows=sum(int(w["windows"]) for w in written),
        late=sum(int(s["late"]) for s in stats),
        dead=sum(int(s["dead"]) for s in stats),
        watermark=None if max_ts is None else bound.watermark_for(int(max_ts)),
        min_end=min((int(w["min_end"]) for w in written), default=None),
        max_end=max((int(w["max_end"]) for w in written), default=None),
        sst_dir=str(out_dir / "sst"),
        seconds=round(time.monotonic() - t0, 3),
        compute_seconds=round(compute_s, 3),
    )
