"""Stage 1 of a backfill, in the Spark tasks: one split (a file, or a Kafka partition) through
the engine's own chain, to the ``(record, window)`` pairs the streaming rule keeps.

The chain decodes, takes timestamps, runs the job's map/filter/flat_map steps and key selector,
and gives each record the watermark its split had before it (max event time so far in the
split, minus the bound, minus 1), as a streaming split does. A pair is kept when
``end - 1 + allowed_lateness > watermark``, so late data is dropped (and counted) the same way;
a record is late when all its windows are. Malformed records, records without a timestamp or
an aggregated field, are counted as dead. Session windows keep every record here: whether one
is late depends on the session it joins, which the next stage (``sessions.py``) decides.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from weir.base.errors import SourceError, WeirError
from weir.engine.sources.base import SourceBatch
from weir.engine.spark.output import task_output
from weir.engine.spark.plan import Plan, backfill_operator, load
from weir.engine.watermarks import MIN_WATERMARK

if TYPE_CHECKING:  # numpy and pyarrow come with the Spark extra: imported in the tasks only
    from weir.engine.spark.columnar import PlainJob
    from weir.engine.spark.selector import Selector


def pairs_of_file(plan: Plan, path: str, fmt: str) -> Iterator[dict[str, Any]]:
    """One input file's pairs: the file is one split."""
    from weir.engine.spark.columnar import column_batches, plain_job
    from weir.engine.spark.inputs import file_batches

    plain = plain_job(load(plan.job_file), backfill_operator(load(plan.job_file), plan.op))
    if fmt == "jsonl" and plain is not None:  # read as columns (``columnar.py``)
        yield from pairs_of_split(plan, path, column_batches(path, plain), plain)
    else:
        yield from pairs_of_split(plan, path, file_batches(path, fmt))


def pairs_of_kafka(
    plan: Plan, topic: str, metadata: bool, batches: Iterator[Any]
) -> Iterator[dict[str, Any]]:
    """One Kafka partition's pairs, from the Arrow batches of the ``weir-kafka`` data source's
    Spark partition that read it, in offset order: the partition is one split."""
    from weir.engine.spark.kafka_source import source_batch

    rows = (b for b in batches if b.num_rows)
    first = next(rows, None)
    if first is None:
        return
    partition = first.column("partition")[0].as_py()

    def source_batches() -> Iterator[SourceBatch]:
        for b in itertools.chain([first], rows):
            if b.column("partition").unique().to_pylist() != [partition]:
                raise SourceError(f"a Spark task of topic {topic} got several Kafka partitions")
            yield source_batch(b, metadata)

    yield from pairs_of_split(plan, f"{topic}/{partition}", source_batches())


def pairs_of_split(
    plan: Plan, split: str, batches: Iterator[Any], plain: PlainJob | None = None
) -> Iterator[dict[str, Any]]:
    """The kept ``(record, window)`` pairs of one split, in column batches; the split's counts
    (late, dead) and max event time go to ``stats/`` of the output (``output.TaskOutput``). A
    ``WeirError`` (an unreadable input) goes to its ``errors/`` for the driver to report.
    ``batches``: ``SourceBatch`` es, and for a ``plain`` job also Arrow record batches of its fields
    (``columnar.column_batches``)."""
    from weir.engine.runtime.operators.columns import ColumnBatch
    from weir.engine.runtime.outputs import DeadLetters
    from weir.engine.runtime.task.chain import Chain, keyby_nodes
    from weir.engine.sinks import from_url as sink_from_url
    from weir.engine.spark.selector import Selector

    job = load(plan.job_file)
    op = backfill_operator(job, plan.op)
    source = job.sources[0]
    node_index = next(
        i for i, n in enumerate(keyby_nodes(source)) if any(c is op for c in n.children)
    )
    output = task_output(plan)
    with output.dead_letters(_file_name(split)) as dead_path:
        dead = DeadLetters(sink_from_url(f"file://{dead_path}"), quiet=True)
        chain = Chain(source, {}, dead)
        select = Selector(plan, op, split)
        bound = source.watermarks.bound_ms
        max_ts = None
        try:
            for batch in batches:
                if plain is not None and not isinstance(batch, SourceBatch):
                    out = _from_columns(select, chain.max_ts, plain, split, batch, bound)
                    max_ts = chain.max_ts[split]
                    if len(out["key"]):
                        yield out
                    continue
                chain.process(batch, split)
                for item in chain.keyed:
                    assert not isinstance(item, ColumnBatch)  # a chain made without columnar
                    node, keys, recs, ts, wms = item
                    if node == node_index:
                        out = select.columns(keys, recs, ts, wms)
                        if len(out["key"]):
                            yield out
                if batch.items:
                    t = chain.max_ts.get(split)
                    max_ts = t if t is not None else max_ts
        except WeirError as exc:
            output.put_text(f"errors/{_file_name(split)}.txt", str(exc))
            raise
        finally:
            dead.close()
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # the reader of a split left early
    stats = {"split": split, "late": select.late, "dead": dead.count + select.dead,
             "max_ts": max_ts}  # fmt: skip
    output.put_text(f"stats/{_file_name(split)}.json", json.dumps(stats))


def _from_columns(
    select: Selector, max_ts: dict[str, int], plain: PlainJob, split: str, table: Any,
    bound_ms: int,
) -> dict[str, Any]:  # fmt: skip
    """A clean block's pairs; the block moves the split's max event time (``max_ts``, the
    chain's) as the chain would."""
    from weir.engine.spark.columnar import KEEP, watermarks

    t = table.column(plain.ts).to_numpy()
    wms, max_ts[split] = watermarks(t, max_ts.get(split, MIN_WATERMARK), bound_ms)
    if plain.filters:  # every record moves the watermark; the filters' rows go on
        keep = table.column(KEEP).to_numpy(zero_copy_only=False)
        table = table.filter(keep)
        t, wms = t[keep], wms[keep]
        select.seq += len(keep) - len(t)  # the split's records, dropped ones too
    values = {f: table.column(f).to_numpy() for f in plain.fields}
    return select.arrow_columns(table.column(plain.key), t, wms, values)


def _file_name(split: str) -> str:
    return hashlib.sha1(split.encode()).hexdigest()  # noqa: S324 - a file name, not security
