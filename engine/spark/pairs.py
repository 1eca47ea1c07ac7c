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
import pickle
from collections.abc import Iterator
from typing import Any

from weir.engine.errors import SourceError, WeirError
from weir.engine.job import WindowOperator
from weir.engine.runtime.operators.fold import FoldPlan
from weir.engine.sources.base import SourceBatch
from weir.engine.spark.output import task_output
from weir.engine.spark.plan import Plan, backfill_operator, load, python_path
from weir.engine.windows import MAX_TIME, MIN_TIME, SessionWindows, is_late

# what the Python path adds to (kg, key, end): ts, the watermark the record arrived under, its
# split and position there (streaming's order), and the pickled record
PYTHON_COLUMNS = ["ts", "wm", "split", "seq", "rec"]


def pairs_of_file(plan: Plan, path: str, fmt: str) -> Iterator[dict[str, list[Any]]]:
    """One input file's pairs: the file is one split."""
    from weir.engine.spark.inputs import file_batches

    yield from pairs_of_split(plan, path, file_batches(path, fmt))


def pairs_of_kafka(
    plan: Plan, topic: str, metadata: bool, batches: Iterator[Any]
) -> Iterator[dict[str, list[Any]]]:
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
    plan: Plan, split: str, batches: Iterator[SourceBatch]
) -> Iterator[dict[str, list[Any]]]:
    """The kept ``(record, window)`` pairs of one split, in column batches; the split's counts
    (late, dead) and max event time go to ``stats/`` of the output (``output.TaskOutput``). A
    ``WeirError`` (an unreadable input) goes to its ``errors/`` for the driver to report."""
    from weir.engine.runtime.outputs import DeadLetters
    from weir.engine.runtime.task.chain import Chain, keyby_nodes
    from weir.engine.sinks import from_url as sink_from_url

    job = load(plan.job_file)
    op = backfill_operator(job, plan.op)
    source = job.sources[0]
    node_index = next(
        i for i, n in enumerate(keyby_nodes(source)) if any(c is op for c in n.children)
    )
    output = task_output(plan)
    with output.dead_letters(_file_name(split)) as dead_path:
        dead = DeadLetters(sink_from_url(f"file://{dead_path}"))
        chain = Chain(source, {}, dead)
        select = _Selector(plan, op, split)
        max_ts = None
        try:
            for batch in batches:
                chain.process(batch, split)
                out = select.empty()
                for node, keys, recs, ts, wms in chain.keyed:
                    if node == node_index:
                        select.add(out, keys, recs, ts, wms)
                if batch.items:
                    t = chain.max_ts.get(split)
                    max_ts = t if t is not None else max_ts
                if out["key"]:
                    yield out
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


class _Selector:
    """Keyed records of one split to output columns. Native path: the kept pairs' aggregated
    fields as doubles (and whether each was an int). Python path: the kept pairs with the
    record itself (pickled: it stays inside Spark's own executors, and a ``map`` may have made
    it anything), its event time, the watermark it arrived under and its position in the split,
    so the next stage folds each window's records in streaming's order. Sessions keep every
    record (lateness depends on the session a record joins: the next stage decides it); their
    ``end`` is 0."""

    def __init__(self, plan: Plan, op: WindowOperator, split: str) -> None:
        self.fields = FoldPlan(op.aggregates).fields  # the fields the streaming fold reads
        self.python = python_path(op)
        self.assigner = op.assigner
        self.lateness = op.allowed_lateness_ms
        self.m = plan.max_parallelism
        self.lo = plan.from_ms if plan.from_ms is not None else MIN_TIME
        self.hi = plan.to_ms if plan.to_ms is not None else MAX_TIME + 1
        self.split = split
        self.seq = 0  # records of the split so far
        self.late = self.dead = 0

    def empty(self) -> dict[str, list[Any]]:
        names = ["kg", "key", "end"]
        if self.python:
            names += PYTHON_COLUMNS
        else:
            names += [c for f in self.fields for c in (f, f + "__int")]
        return {n: [] for n in names}

    def add(
        self, out: dict[str, list[Any]], keys: list[str], recs: list[Any], ts: list[int],
        wms: list[int],
    ) -> None:  # fmt: skip
        from weir.state.keygroups import key_groups

        sel, rows, ends = self._kept(ts, wms, recs)
        try:
            cols = [[recs[i][f] for i in rows] for f in self.fields]
            if not all(set(map(type, c)) <= {int, float} for c in cols):
                raise TypeError
        except (KeyError, TypeError, IndexError):
            sel, rows, cols, bad = _good_fields(sel, rows, recs, self.fields)
            self.dead += bad
        kgs = key_groups(keys, self.m)
        out["kg"] += [kgs[i] for i in rows]
        out["key"] += [keys[i] for i in rows]
        out["end"] += [ends[j] for j in sel]
        if self.python:
            out["ts"] += [ts[i] for i in rows]
            out["wm"] += [wms[i] for i in rows]
            out["split"] += [self.split] * len(rows)
            out["seq"] += [self.seq + i for i in rows]
            out["rec"] += [pickle.dumps(recs[i], protocol=pickle.HIGHEST_PROTOCOL) for i in rows]
        else:
            for f, col in zip(self.fields, cols, strict=True):
                out[f] += list(map(float, col))
                out[f + "__int"] += [type(v) is int for v in col]
        self.seq += len(keys)

    def _kept(
        self, ts: list[int], wms: list[int], recs: list[Any]
    ) -> tuple[list[int], list[int], list[int]]:
        """``(pair indices, their records, window ends)`` of the pairs to keep. A record whose
        dynamic session gap is unusable is dead here, as streaming's session operator makes it."""
        if isinstance(self.assigner, SessionWindows):
            keep = list(range(len(ts)))
            if self.assigner.dynamic:
                gap_of = self.assigner.gap_of
                keep = [i for i in keep if gap_of(recs[i])[1] is None]
                self.dead += len(ts) - len(keep)
            return keep, keep, [0] * len(ts)
        ends, origin = self.assigner.expand(ts)
        idx = origin if origin is not None else range(len(ends))
        lateness = self.lateness
        # the streaming rule, per (record, window): kept while the window can change; a record
        # is late when all its windows are
        on_time = [j for j, i in enumerate(idx) if not is_late(ends[j], lateness, wms[i])]
        if origin is None:  # one window a record (tumbling): a late pair is a late record
            self.late += len(ends) - len(on_time)
        else:
            self.late += len(set(idx)) - len({idx[j] for j in on_time})
        sel = [j for j in on_time if self.lo <= ts[idx[j]] < self.hi]
        return sel, [idx[j] for j in sel], ends


def _file_name(split: str) -> str:
    return hashlib.sha1(split.encode()).hexdigest()  # noqa: S324 - a file name, not security


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
