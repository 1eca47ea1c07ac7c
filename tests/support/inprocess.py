"""Run a job's chain and operators in-process, batch by batch, the way a single worker with one
split does: ``weir.testing.Harness`` over the in-memory state backend unless the caller passes
one (the contract suite in ``tests/contract/`` holds both backends to the same behaviour), with the
batch cuts and state flushes the property tests draw. ``build_job`` turns a reference ``Spec``
into the job the brute-force model in ``tests/support/reference.py`` describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from tests.support.reference import Spec
from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.state.backend import StateBackend
from weir.state.memory import MemoryState
from weir.testing import Harness


def build_job(spec: Spec, max_parallelism: int = 128) -> Job:
    job = Job("inproc", max_parallelism=max_parallelism)
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp=spec.ts_field,
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=spec.bound),
    )
    for kind, src in spec.steps:
        stream = getattr(stream, kind)(eval(src))  # noqa: S307 - test-owned source text
    assigner: windows.WindowAssigner = windows.tumbling(ms=spec.size, offset_ms=spec.offset)
    if spec.gap is not None:
        assigner = windows.session(gap_ms=spec.gap)
    elif spec.gap_field is not None:
        assigner = windows.dynamic_session(itemgetter(spec.gap_field))
    elif spec.slide is not None:
        assigner = windows.sliding(size_ms=spec.size, slide_ms=spec.slide, offset_ms=spec.offset)
    elif spec.step is not None:
        assigner = windows.cumulate(size_ms=spec.size, step_ms=spec.step)
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
    *,
    decoded: bool = True,
    flush_after: Sequence[bool] = (),
    retention_ms: int = 3_600_000,
    job: Job | None = None,
    state: StateBackend | None = None,
) -> Run:
    """Feed ``items`` in batches of ``batch_sizes`` (the rest in one last batch), flushing
    state to RocksDB after the batches ``flush_after`` marks. ``job`` replaces the one built
    from ``spec`` (whose ``op`` names the operator to run). A ``state`` passed in stays open,
    for the caller to read what the operators stored."""
    sizes = list(batch_sizes)
    if sum(sizes) < len(items):
        sizes.append(len(items) - sum(sizes))
    pos = 0
    backend = MemoryState() if state is None else state
    with Harness(job or build_job(spec), state=backend, state_retention_ms=retention_ms) as h:
        for i, n in enumerate(sizes):
            h.feed(items[pos : pos + n], decoded=decoded)
            pos += n
            if i < len(flush_after) and flush_after[i]:
                h.flush()
        out = h.finish()
    if state is None:
        backend.close()
    return Run(
        out.results,
        out.late,
        [{"stage": d["stage"], "input": d["input"]} for d in out.dead],
    )
