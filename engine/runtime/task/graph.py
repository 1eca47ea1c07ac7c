"""The job's graph as a worker runs it: which key_by nodes exist (their index names them on the
exchange), which sinks, which operators (each once, though a co-process function hangs under
two key_by nodes), which sources feed each operator, and the splits of every source.

An operator's watermark is the minimum over the sources that feed it (Flink's rule for
several inputs), so ``inputs`` is what the keyed side groups its channels by. Split ids of a
one-source job are the source's own split names, as checkpoints always recorded them; a job of
several sources prefixes each with its source's name (``clicks/0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from weir.engine.columnar import input_fields, refusal
from weir.engine.job import Job
from weir.engine.nodes import (
    BroadcastNode,
    ForwardNode,
    OperatorNode,
    SinkNode,
    WindowNode,
)
from weir.engine.runtime.task.chain import ExchangeNode, keyby_nodes, sink_nodes

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Graph:
    keyby: list[ExchangeNode]  # definition order over the sources; the index is the node's id
    sinks: list[SinkNode]
    operators: list[OperatorNode]
    inputs: dict[str, tuple[int, ...]]  # operator name -> indexes of the sources feeding it

    @property
    def keyby_index(self) -> dict[int, int]:
        return {id(n): i for i, n in enumerate(self.keyby)}

    @property
    def broadcast(self) -> frozenset[int]:
        """The indexes of the broadcast nodes: their records go to every worker."""
        return frozenset(i for i, n in enumerate(self.keyby) if isinstance(n, BroadcastNode))

    def column_nodes(self) -> dict[int, list[str]]:
        """The key_by nodes (by index) whose operators all fold columns
        (``operators.colwindow``), each with the fields those operators aggregate: their rows
        go to the keyed side, and over the exchange, as ``ColumnBatch``es."""
        found: dict[int, list[str]] = {}
        for i, node in enumerate(self.keyby):
            if refusal(node) is not None:
                continue
            fields: list[str] = []
            for op in node.children:
                assert isinstance(op, WindowNode)
                fields += [f for f in input_fields(op) if f not in fields]
            found[i] = fields
        return found

    @property
    def forward(self) -> frozenset[int]:
        """The indexes of the forward nodes: their records stay on the worker that read them."""
        return frozenset(i for i, n in enumerate(self.keyby) if isinstance(n, ForwardNode))


def _unique(items: list[T]) -> list[T]:
    seen: set[int] = set()
    out: list[T] = []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


def graph_of(job: Job) -> Graph:
    keyby = _unique([n for s in job.sources for n in keyby_nodes(s)])
    sinks = _unique([n for s in job.sources for n in sink_nodes(s)])
    operators = _unique([op for n in keyby for op in n.children])
    inputs: dict[str, set[int]] = {op.name: set() for op in operators}
    for i, source in enumerate(job.sources):
        for node in keyby_nodes(source):
            for op in node.children:
                inputs[op.name].add(i)
    return Graph(keyby, sinks, operators, {k: tuple(sorted(v)) for k, v in inputs.items()})


@dataclass(frozen=True, slots=True)
class SplitId:
    source: int  # the source's index in the job
    id: str  # as checkpoints key its position
    split: str  # the source's own name for it


def split_prefix(job: Job, index: int) -> str:
    """What the split ids of source ``index`` start with: its name, when there are several."""
    return f"{job.sources[index].name}/" if len(job.sources) > 1 else ""


def split_ids(job: Job, parallelism: int) -> list[SplitId]:
    """Every split of every source, in order; worker ``i`` of ``p`` reads every ``p``-th from
    ``i`` (``[i::p]``)."""
    return [
        SplitId(i, split_prefix(job, i) + split, split)
        for i, s in enumerate(job.sources)
        for split in s.source.splits(parallelism)
    ]
