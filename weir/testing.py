"""Run a job in-process over a list of events, for a test or a notebook:

    from weir import testing

    result = testing.run(job, [{"id": "ad-1", "ts": 1_000, "value": 3}, ...])
    result.results  # window results (and process-function output), as the job's sinks get them
    result.late     # records past allowed lateness: {"op", "key", "ts", "watermark", "record"}
    result.dead     # dead letters: {"stage", "reason", "input"}
    result.side     # process functions' side outputs: {operator: {tag: [records]}}

The job's own chain and operators run (the real window, sliding, session and process operators)
the way ``weir run`` runs them in one worker reading one split: the events replace the job's
source, whose timestamp and watermark strategy still apply, and after the last event a final
watermark fires every window, as at the end of a file. State is a real RocksDB in a temporary
directory, removed at the end. Nothing is written to the job's sinks; what they would get is in
the result. Event time makes the result deterministic: no wall clock limits timestamps
(``weir run``'s ``--max-future-ms`` is off unless ``max_future_ms`` is given), and
processing-time windows and timers fire only if the clock passes them during the run.

A job of several sources takes its events per source, ``testing.run(job, {"views": [...],
"clicks": [...]})``: each source's events go through its own chain, batch by batch, taking turns
in the mapping's order, and a source whose events are all in has ended (as a file does). Each
operator's watermark is the minimum over the sources that feed it, as in ``weir run``.

``parallelism=N`` runs N workers in-process, each with its own key-group range, operators and
RocksDB, the way ``weir run --parallelism N`` splits a job: worker ``i % N`` reads source
``i``'s split, and every source batch's keyed records go to the workers owning their key groups
(broadcast inputs to all of them) together with the split's watermarks, as the exchange carries
them. Window results do not depend on N; the order in which different keys' results arrive does.

``Harness`` drives the same thing batch by batch, for tests of batching itself, and
``evaluate`` runs one expression on one record, as a job's steps run it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from weir.base.errors import JobDefinitionError
from weir.engine import kernels as kernel_choice
from weir.engine.expressions import Expr
from weir.engine.expressions.steps import failure
from weir.engine.job import Job
from weir.engine.kernels.rows import compile_row
from weir.engine.runtime.operators.columns import ColumnBatch
from weir.engine.runtime.operators.factory import runtimes_for
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.task.chain import Keyed
from weir.engine.runtime.task.colchain import chain_for
from weir.engine.runtime.task.graph import SplitId, graph_of
from weir.engine.runtime.task.keyed import KeyedSide
from weir.engine.runtime.task.routing import ACTIVE, ENDED
from weir.engine.sinks import SinkWriter
from weir.engine.sources import SourceBatch
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import key_groups, range_for_operator, validate_parallelism
from weir.state.rocksdb import RocksState

SPLIT = "0"
DEFAULT_RETENTION_MS = 3_600_000  # weir run's --state-retention-ms


@dataclass(frozen=True, slots=True)
class Result:
    """What a run produced, each list in the order it was produced."""

    results: list[Any]  # every operator's output: window results are {"op", "key", "start", …}
    late: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    by_operator: dict[str, list[Any]] = field(default_factory=dict)  # results, per operator name
    sunk: list[Any] = field(default_factory=list)  # what the stream's own .sink(...) nodes got
    side: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # by operator, tag


def run(
    job: Job,
    events: Iterable[Any] | Mapping[str, Iterable[Any]],
    *,
    batch_size: int = 1024,
    state_retention_ms: int = DEFAULT_RETENTION_MS,
    max_future_ms: int = 0,
    parallelism: int = 1,
) -> Result:
    """Run ``job`` over ``events`` (decoded values, normally dicts) and return its output.

    ``events``: a list for a job of one source, or a mapping of source name to a list (a job of
    several sources; a source left out has no events). ``batch_size`` is how many events go
    through the chain at once; like ``weir run --batch-size`` it changes no window's results
    nor any late record of a one-source job, only how the results of different windows
    interleave."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} is too small; use 1 or more")
    with Harness(
        job,
        state_retention_ms=state_retention_ms,
        max_future_ms=max_future_ms,
        parallelism=parallelism,
    ) as harness:
        per_source = harness.events_by_source(events)
        turns = [(name, iter(items)) for name, items in per_source.items()]
        for name, items in per_source.items():
            if not items:
                harness.end(name)
        while turns:
            name, it = turns.pop(0)
            batch = [e for _, e in zip(range(batch_size), it, strict=False)]
            harness.feed(batch, source=name)
            if len(batch) == batch_size:
                turns.append((name, it))
            else:
                harness.end(name)
        return harness.finish()


class Harness:
    """The workers' chains and operators over real RocksDB (or, for one worker, the ``state``
    backend given, which is left open for the caller to read), driven by hand: ``feed`` a
    batch, ``flush`` (write open windows to RocksDB and purge, as a worker does every flush
    interval), ``finish`` (the final watermark; returns the result and closes). Use it as a
    context manager, or call ``close``."""

    def __init__(
        self,
        job: Job,
        *,
        state_dir: Path | None = None,
        state: StateBackend | None = None,
        state_retention_ms: int = DEFAULT_RETENTION_MS,
        max_future_ms: int = 0,
        parallelism: int = 1,
    ) -> None:
        job.validate()
        validate_parallelism(parallelism, job.max_parallelism)
        if state is not None and parallelism > 1:
            raise ValueError(f"a state backend serves one worker; parallelism={parallelism}")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._owns_state = state is None
        if state is None and state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="weir-testing-")
            state_dir = Path(self._tmp.name)
        self._states = (
            [state]
            if state is not None
            else [RocksState(state_dir / f"db{j or ''}") for j in range(parallelism)]  # type: ignore[operator]
        )
        self._state = self._states[0]
        self._late_out, self._dead_out, self._sunk = Collected(), Collected(), Collected()
        self._late = LateRecords(self._late_out)
        self._dead = DeadLetters(self._dead_out)
        self._graph = graph = graph_of(job)  # a connected stream's co-process: one runtime
        self._m, self._p = job.max_parallelism, parallelism
        self._names = [src.name for src in job.sources]
        # each worker's own keyed side: each operator's watermark is the minimum over the
        # sources feeding it, a record arrives under its own source's watermark bounded by the
        # others'; worker j reads every p-th split from j, here source i's one split
        every = [SplitId(i, SPLIT, SPLIT) for i in range(len(self._names))]
        self._ops = []
        self._workers: list[KeyedSide] = []
        for j, worker_state in enumerate(self._states):
            groups = range_for_operator(job.max_parallelism, parallelism, j)
            ops, feeds = runtimes_for(
                graph.keyby, worker_state, groups, job.max_parallelism, self._late, self._dead,
                state_retention_ms,
            )  # fmt: skip
            self._ops += list(ops.values())
            self._workers.append(
                KeyedSide(ops, feeds, graph.inputs, parallelism, every, collect=self._collect)
            )
        self._keyed = self._workers[0]  # the first worker's (the only one's, by default)
        writers: dict[int, SinkWriter] = {id(n): self._sunk.open() for n in graph.sinks}
        columnar = graph.column_nodes()
        self._chains = [
            chain_for(src, writers, self._dead, max_future_ms or None, graph.keyby_index, columnar)
            for src in job.sources
        ]
        self._ended = [False] * len(self._chains)
        self._results: list[Any] = []
        self._by_operator: dict[str, list[Any]] = {rt.op.name: [] for rt in self._ops}
        self._side: dict[str, dict[str, list[Any]]] = {}
        self._closed = False

    def feed(
        self, items: Sequence[Any], *, decoded: bool = True, source: str | None = None
    ) -> None:
        """One source batch: decoded values, or (``decoded=False``) raw JSON lines as bytes.
        ``source``: the source's name (needed when the job has several)."""
        i = self._source_index(source)
        chain = self._chains[i]
        chain.process(SourceBatch(items=list(items), decoded=decoded), SPLIT)
        watermark = chain.watermark(SPLIT)
        trace = list(chain.trace)  # the watermark after each record
        if not trace or trace[-1] != watermark:
            trace.append(watermark)
        self._route(i, chain.keyed, trace, watermark, ACTIVE)

    def _route(
        self, source: int, keyed: list[Keyed], trace: list[int], data: int, status: int
    ) -> None:
        """``source``'s batch to every worker, as the exchange routes it: keyed records to the
        owners of their key groups, a broadcast input's to all, a forward input's to the worker
        that read them; the watermarks to all."""
        p, m, reader = self._p, self._m, source % self._p
        parts: list[list[Keyed]] = [[] for _ in range(p)]
        broadcast, forward = self._graph.broadcast, self._graph.forward
        for batch in keyed:
            if isinstance(batch, ColumnBatch):  # by owner in bulk, as the router splits it
                owners = batch.keys.groups(kernel_choice.KERNELS, m) * p // m
                for j in range(p):
                    picked = np.flatnonzero(owners == j)
                    if len(picked):
                        whole = len(picked) == len(batch)
                        parts[j].append(batch if whole else batch.take(picked))
                continue
            node, keys, recs, ts, wms = batch
            if p == 1 or node in broadcast:
                for part in parts:
                    part.append(batch)
                continue
            if node in forward:
                parts[reader].append(batch)
                continue
            owners = [kg * p // m for kg in key_groups(keys, m)]
            for j in sorted(set(owners)):
                rows = [i for i, o in enumerate(owners) if o == j]
                k, r, t, w = take_rows(rows, keys, recs, ts, wms)
                parts[j].append((node, k, r, t, w))
        for worker, part in zip(self._workers, parts, strict=True):
            worker.deliver(str(reader), part, trace, data, status, source)

    @property
    def by_operator(self) -> dict[str, list[Any]]:
        """Each operator's output so far."""
        return self._by_operator

    def end(self, source: str | None = None) -> None:
        """``source`` has no more events (a file at its end): it stops holding time back."""
        i = self._source_index(source)
        if not self._ended[i]:
            self._ended[i] = True
            data = self._chains[i].watermark(SPLIT)
            self._route(i, [], [MAX_WATERMARK], data, ENDED)

    def events_by_source(
        self, events: Iterable[Any] | Mapping[str, Iterable[Any]]
    ) -> dict[str, list[Any]]:
        """``run``'s ``events`` as a list per source name, every source named."""
        if isinstance(events, Mapping):
            unknown = sorted(set(events) - set(self._names))
            if unknown:
                raise JobDefinitionError(
                    f"events for {', '.join(map(repr, unknown))}: the job's sources are "
                    f"{', '.join(self._names)}; key the events by those names"
                )
            given = {n: list(items) for n, items in events.items()}  # turns in this order
            return given | {n: [] for n in self._names if n not in given}
        if len(self._names) > 1:
            raise JobDefinitionError(
                f"the job reads {len(self._names)} sources ({', '.join(self._names)}); pass "
                "the events per source: {'<source name>': [events], ...}"
            )
        return {self._names[0]: list(events)}

    def _source_index(self, source: str | None) -> int:
        if source is None:
            if len(self._names) > 1:
                raise JobDefinitionError(
                    f"the job reads {len(self._names)} sources ({', '.join(self._names)}); "
                    "name the one these events come from: feed(items, source=...)"
                )
            return 0
        if source not in self._names:
            raise JobDefinitionError(
                f"source {source!r} is not one of the job's ({', '.join(self._names)})"
            )
        return self._names.index(source)

    def flush(self) -> None:
        """Write every operator's state to RocksDB and purge what retention allows, as a
        worker's periodic flush does."""
        for rt in self._ops:
            rt.flush()
            rt.purge(force=True)

    def finish(self) -> Result:
        """The end of the input: a final watermark fires every window."""
        try:
            for name in self._names:
                self.end(name)
            for worker in self._workers:
                worker.finish()
        finally:
            self.close()
        return Result(
            results=self._results,
            late=self._late_out.records,
            dead=self._dead_out.records,
            by_operator=self._by_operator,
            sunk=self._sunk.records,
            side=self._side,
        )

    def close(self) -> None:
        """Release the state and the temporary directory (``finish`` and ``with`` call it)."""
        if self._closed:
            return
        self._closed = True
        self._late.close()
        self._dead.close()
        if self._owns_state:
            for state in self._states:
                state.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Harness:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _collect(self, name: str, results: list[Any], side: dict[str, list[Any]]) -> None:
        self._results.extend(results)
        self._by_operator[name].extend(results)
        for tag, recs in side.items():
            self._side.setdefault(name, {}).setdefault(tag, []).extend(recs)


def take_rows(rows: list[int], *columns: list[Any]) -> tuple[list[Any], ...]:
    """The rows ``rows`` of each column."""
    return tuple([col[i] for i in rows] for col in columns)


def evaluate(expr: Expr, record: Mapping[str, Any]) -> Any:
    """``expr``'s value on ``record`` (a decoded JSON object), as a job's steps compute it:
    ``None`` for NULL.

    Raises:
        ValueError: the record would go to the dead letters; the message is the reason that
            follows the step's name there (``(col("v") / col("n")) raised: 1 / 0: division by
            zero``).

    Example:
        >>> from weir import col, testing
        >>> testing.evaluate(col("price") * col("qty"), {"price": 3, "qty": 2})
        6
        >>> testing.evaluate(col("price") > 1, {}) is None
        True
    """
    return compile_row(expr.ir, wrap=lambda why: failure(expr.ir, why))(record)


class Collected:
    """A sink that keeps what it is given, in memory."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def describe(self) -> str:
        """``memory://``."""
        return "memory://"

    def prepare(self) -> None:
        """Nothing to prepare: ``records`` keeps what earlier runs gave it."""
        return None

    def open(self) -> Collected:
        """Itself: every writer appends to the same ``records``."""
        return self

    def write(self, records: list[dict[str, Any]]) -> None:
        """Keep ``records``."""
        self.records.extend(records)  # the caller reuses its list

    def flush(self) -> None:
        """Nothing to flush."""
        return None

    def close(self) -> None:
        """Nothing to close."""
        return None


__all__ = ["Collected", "Harness", "Result", "evaluate", "run"]
