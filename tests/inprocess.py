"""Run a job's chain and window operator in-process, batch by batch, the way a single worker
with one split does (``engine/runtime/worker.py``): ``chain.process(batch, split)``, the keyed
sub-batches to their operators, then ``advance(watermark, data watermark, trace)`` with the
watermark after each record; at the end ``advance(MAX_WATERMARK, ..., [MAX_WATERMARK])``. State
is the in-memory backend unless the caller passes one (the contract suite in ``tests/contract/``
holds both backends to the same behaviour); late records and dead letters go to real JSONL sinks
under the given directory, read back at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.reference import Spec
from tests.support import read_jsonl
from weir import Job, WatermarkStrategy, agg, sinks, sources, windows
from weir.engine.runtime.chain import Chain, keyby_nodes
from weir.engine.runtime.operators import runtime_for
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.sources import SourceBatch
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState

SPLIT = "0"


def build_job(spec: Spec, max_parallelism: int = 128) -> Job:
    job = Job("inproc", max_parallelism=max_parallelism)
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp=spec.ts_field,
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=spec.bound),
    )
    for kind, src in spec.steps:
        stream = getattr(stream, kind)(eval(src))  # noqa: S307 - test-owned source text
    assigner: windows.WindowAssigner = windows.tumbling(ms=spec.size)
    if spec.gap is not None:
        assigner = windows.session(gap_ms=spec.gap)
    elif spec.slide is not None:
        assigner = windows.sliding(size_ms=spec.size, slide_ms=spec.slide)
    stream.key_by(spec.key_field).window(assigner, allowed_lateness_ms=spec.lateness).aggregate(
        spec.op,
        count=agg.count(),
        total=agg.sum(spec.value_field),
        lo=agg.min(spec.value_field),
        hi=agg.max(spec.value_field),
        avg=agg.mean(spec.value_field),
    )
    return job


@dataclass
class Run:
    results: list[dict[str, Any]]
    late: list[dict[str, Any]]
    dead: list[dict[str, Any]]


def run_batches(
    items: Sequence[Any],
    spec: Spec,
    batch_sizes: Sequence[int],
    root: Path,
    *,
    decoded: bool = True,
    flush_after: Sequence[bool] = (),
    retention_ms: int = 3_600_000,
    job: Job | None = None,
    state: StateBackend | None = None,
) -> Run:
    """Feed ``items`` in batches of ``batch_sizes`` (the rest in one last batch). ``job``
    replaces the one built from ``spec`` (whose ``op`` names the operator to run). A ``state``
    passed in stays open, for the caller to read what the operators stored."""
    job = job or build_job(spec)
    source = job.sources[0]
    owned = state is None
    state = MemoryState() if state is None else state
    late = LateRecords(sinks.jsonl(root / "late.jsonl"))
    dead = DeadLetters(sinks.jsonl(root / "dead.jsonl"))
    node_ops = [
        [
            runtime_for(op, state, range_for_operator(128, 1, 0), 128, late, dead, retention_ms)
            for op in node.children
        ]
        for node in keyby_nodes(source)
    ]
    ops = [rt for rts in node_ops for rt in rts]
    chain = Chain(source, {}, dead)
    results: list[dict[str, Any]] = []
    sizes = list(batch_sizes)
    if sum(sizes) < len(items):
        sizes.append(len(items) - sum(sizes))
    pos = 0

    def advance(wm: int, trace: list[int]) -> None:
        for rt in ops:
            rt.advance(wm, chain.watermark(SPLIT), trace)
            results.extend(rt.drain())

    try:
        for i, n in enumerate(sizes):
            chain.process(SourceBatch(items=list(items[pos : pos + n]), decoded=decoded), SPLIT)
            pos += n
            wm = chain.watermark(SPLIT)
            trace = list(chain.trace)
            if not trace or trace[-1] != wm:
                trace.append(wm)
            for node, keys, recs, ts, wms in chain.keyed:
                for rt in node_ops[node]:
                    rt.process(keys, recs, ts, wms, trace)
            advance(wm, trace)
            if i < len(flush_after) and flush_after[i]:
                for rt in ops:
                    rt.flush()
                    rt.purge(force=True)
        advance(MAX_WATERMARK, [MAX_WATERMARK])
        for rt in ops:
            rt.flush()
            rt.purge(force=True)
    finally:
        late.close()
        dead.close()
        if owned:
            state.close()
    return Run(
        results,
        read_jsonl(root / "late.jsonl"),
        [{"stage": d["stage"], "input": d["input"]} for d in read_jsonl(root / "dead.jsonl")],
    )
