"""A worker's keyed side: the operators of its key-group range, fed by one input channel per
worker (its own included) and source. An operator's watermark is the minimum over the non-idle
channels of the sources that feed it (Flink's rule for several inputs: an operator fed only by
source A never waits for source B); a record arrives under the watermark it was produced
under, combined with those other channels' current ones. Operators fed by the same sources
share one view of their channels (``_Group``). Results go to each operator's sinks as they are
emitted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from weir.engine.runtime.messages import OperatorMarks, OperatorStatus
from weir.engine.runtime.operators.base import Feed, OperatorRuntime
from weir.engine.runtime.operators.columns import ColumnBatch
from weir.engine.runtime.operators.colwindow import ColumnWindowRuntime
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import LateRecords
from weir.engine.runtime.task.chain import Keyed
from weir.engine.runtime.task.channels import Inputs, combine
from weir.engine.runtime.task.graph import SplitId
from weir.engine.runtime.task.routing import ENDED, IDLE
from weir.engine.sinks import Sink, SinkWriter
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK

Collect = Callable[[str, list[Any], dict[str, list[Any]]], None]


class _Group:
    """The operators fed by one set of sources, with the channels of those sources."""

    def __init__(self, sources: tuple[int, ...], marks: Inputs) -> None:
        self.sources = sources
        self.marks = marks
        self.ops: list[tuple[str, OperatorRuntime]] = []
        self.others = MAX_WATERMARK  # scratch of one delivery: the other channels' minimum
        self.trace: list[int] = []  # and the delivered trace under it


class KeyedSide:
    def __init__(
        self,
        ops: dict[str, OperatorRuntime],
        feeds: list[list[tuple[str, Feed]]],
        inputs: dict[str, tuple[int, ...]],
        parallelism: int,
        every: list[SplitId],
        open_sink: Callable[[Sink], SinkWriter] | None = None,
        side_sinks: dict[str, dict[str, list[Sink]]] | None = None,
        collect: Collect | None = None,
    ) -> None:
        """``feeds``: per key_by node (its index), the operators' inputs it feeds; ``inputs``:
        per operator, the sources feeding it; ``every``: the job's splits, worker ``j`` reads
        every ``parallelism``-th from ``j``. ``open_sink``: how the operators' sinks are opened
        (the worker's ``OutputGate``); ``side_sinks``: the process functions' side outputs'
        (``outputs.tagged_sinks``). ``collect``: instead of sinks, each operator's output goes
        to it as ``collect(name, results, side_outputs)`` (``weir.testing``)."""
        self._collect = collect
        opener = open_sink or (lambda s: s.open())
        self.ops = ops
        self.retention_dropped: Counter[str] = Counter()  # windows purged, by operator
        self._clocked = {n: rt for n, rt in self.ops.items() if rt.processing_time}
        self.sinks: dict[str, list[SinkWriter]] = {
            name: [opener(s) for s in rt.op.sinks] if collect is None else []
            for name, rt in self.ops.items()
        }
        for rt in self.ops.values():
            if collect is None and not rt.op.sinks and isinstance(rt, WindowRuntime):
                rt.emits = False  # only queried: firing needs no result records
        self.side_sinks: dict[str, dict[str, list[SinkWriter]]] = {
            name: {tag: [opener(s) for s in sinks] for tag, sinks in tags.items()}
            for name, tags in (side_sinks or {}).items()
        }
        count = max([s.source + 1 for s in every] + [i + 1 for v in inputs.values() for i in v])
        channels = [str(j) for j in range(parallelism)]
        self.by_source = [Inputs(channels) for _ in range(count)]
        for j in range(parallelism):
            theirs = {s.source for s in every[j::parallelism]}
            for src, marks in enumerate(self.by_source):
                if src not in theirs:  # a worker without splits never holds time back
                    marks.inputs[str(j)].ended = True
                    marks.inputs[str(j)].watermark = MAX_WATERMARK
        self.channels = self._view(range(count))  # every channel of every source
        self._groups = self._group(inputs)
        by_name = {name: g for g in self._groups for name, _ in g.ops}
        self._with = [[g for g in self._groups if src in g.sources] for src in range(count)]
        self._feeds: list[list[tuple[_Group, list[Feed]]]] = []
        # a node whose rows come as columns feeds its operators' ``process_columns``
        self._column_feeds: list[list[tuple[_Group, list[ColumnWindowRuntime]]]] = []
        for node in feeds:
            grouped: dict[int, tuple[_Group, list[Feed]]] = {}
            columns: dict[int, tuple[_Group, list[ColumnWindowRuntime]]] = {}
            for name, feed in node:
                g = by_name[name]
                grouped.setdefault(id(g), (g, []))[1].append(feed)
                rt = self.ops[name]
                if isinstance(rt, ColumnWindowRuntime):
                    columns.setdefault(id(g), (g, []))[1].append(rt)
            self._feeds.append(list(grouped.values()))
            self._column_feeds.append(list(columns.values()))

    def _view(self, sources: range | tuple[int, ...]) -> Inputs:
        return Inputs.of(
            {f"{s}/{c}": mark for s in sources for c, mark in self.by_source[s].inputs.items()}
        )

    def _group(self, inputs: dict[str, tuple[int, ...]]) -> list[_Group]:
        groups: dict[tuple[int, ...], _Group] = {}
        for name, rt in self.ops.items():
            sources = inputs[name]
            group = groups.get(sources)
            if group is None:
                group = groups[sources] = _Group(sources, self._view(sources))
            group.ops.append((name, rt))
        return list(groups.values())

    @property
    def clocked(self) -> bool:
        """Does any operator run on processing time (fire on the clock, input or not)?"""
        return bool(self._clocked)

    def deliver(
        self,
        channel: str,
        keyed: Sequence[Keyed],
        trace: list[int],
        data_wm: int,
        status: int,
        source: int = 0,
    ) -> None:
        """Keyed records and watermark progress of ``source`` from one input channel."""
        key = f"{source}/{channel}"
        groups = self._with[source]
        for g in groups:
            g.others = g.marks.others(key)
            g.trace = combine(trace, g.others)
        for item in keyed:
            if isinstance(item, ColumnBatch):
                for g, runtimes in self._column_feeds[item.node]:
                    batch = item.arrived(g.others)
                    for rt in runtimes:
                        rt.process_columns(batch, g.trace)
                continue
            node, keys, recs, ts, wms = item
            for g, feeds in self._feeds[node]:
                arrived = combine(wms, g.others)
                for feed in feeds:
                    feed(keys, recs, ts, arrived, g.trace)
        mark = self.by_source[source].inputs[channel]
        mark.watermark = max(mark.watermark, trace[-1])
        mark.data_watermark = max(mark.data_watermark, data_wm)
        mark.ended = status == ENDED
        mark.idle = status == IDLE
        for g in groups:
            self._advance(g, g.trace)

    def advance(self, trace: list[int]) -> None:
        for g in self._groups:
            self._advance(g, trace)

    def _advance(self, group: _Group, trace: list[int]) -> None:
        wm, data_wm = group.marks.watermark(), group.marks.data_watermark()
        for name, rt in group.ops:
            rt.advance(wm, data_wm, trace)
            self._emit(name, rt)

    def tick(self) -> None:
        for g in self._groups:
            clocked = [(n, rt) for n, rt in g.ops if n in self._clocked]
            if clocked:
                wm, data_wm = g.marks.watermark(), g.marks.data_watermark()
                for name, rt in clocked:
                    rt.advance(wm, data_wm)
                    self._emit(name, rt)

    def _emit(self, name: str, rt: OperatorRuntime) -> None:
        results = rt.drain()
        if self._collect is not None:
            self._collect(name, results, rt.drain_side())
            return
        if results:
            for w in self.sinks[name]:
                w.write(results)
        tags = self.side_sinks.get(name)
        if tags is not None:
            for tag, recs in rt.drain_side().items():
                for w in tags[tag]:
                    w.write(recs)

    def finish(self) -> None:
        """The end of every input: the final watermark fires every window; state is written
        and what retention allows is purged."""
        self.advance([MAX_WATERMARK])
        for name, rt in self.ops.items():
            rt.flush()
            self.retention_dropped[name] += rt.purge(force=True)

    def flush_operators(self, purge: bool) -> None:
        for name, rt in self.ops.items():
            rt.flush()
            if purge:
                self.retention_dropped[name] += rt.purge()

    def snapshot_operators(self, barrier: bool) -> list[StateDelta]:
        """Every operator's unwritten state, frozen (no RocksDB work); the empty ones left out."""
        return [d for d in (rt.snapshot(barrier) for rt in self.ops.values()) if len(d)]

    def purge_operators(self) -> None:
        for name, rt in self.ops.items():
            self.retention_dropped[name] += rt.purge()

    def _writers(self) -> list[SinkWriter]:
        found = [w for writers in self.sinks.values() for w in writers]
        return found + [w for tags in self.side_sinks.values() for ws in tags.values() for w in ws]

    def flush_sinks(self) -> None:
        for w in self._writers():
            w.flush()

    def close_sinks(self) -> None:
        for w in self._writers():
            w.close()

    def marks(self) -> dict[str, OperatorMarks]:
        return {n: OperatorMarks(rt.watermark, rt.data_watermark) for n, rt in self.ops.items()}

    def status(
        self, late: LateRecords, written: dict[str, OperatorMarks]
    ) -> dict[str, OperatorStatus]:
        """Each operator's figures; ``written``: its marks as of what RocksDB holds."""
        return {
            name: {
                "watermark": rt.watermark,
                "state_watermark": written[name].watermark if name in written else MIN_WATERMARK,
                "data_watermark": rt.data_watermark,
                "records_in": rt.records_in,
                "results_out": rt.results_out,
                "late": late.count[name],
                "open_windows": rt.open_windows,
                "retention_dropped": self.retention_dropped[name],
                "metrics": dict(getattr(rt, "metrics", {})),
                "top": rt.top_status(),
            }
            for name, rt in self.ops.items()
        }
