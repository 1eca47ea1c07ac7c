"""A worker's keyed side: the operators of its key-group range, fed by one input channel per
worker (its own included). An operator's watermark is the minimum over the non-idle channels
(``Inputs``); a record arrives under the watermark it was produced under, combined with the
other channels' current ones. Results go to each operator's sinks as they are emitted.
"""

from __future__ import annotations

from collections.abc import Callable

from weir.engine.runtime.messages import OperatorMarks, OperatorStatus
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.outputs import LateRecords
from weir.engine.runtime.task.chain import KeyedBatch
from weir.engine.runtime.task.channels import Inputs, combine
from weir.engine.runtime.task.routing import ENDED, IDLE
from weir.engine.sinks import Sink, SinkWriter
from weir.engine.watermarks import MAX_WATERMARK


class KeyedSide:
    def __init__(
        self,
        node_ops: list[list[OperatorRuntime]],
        parallelism: int,
        splits: list[str],
        open_sink: Callable[[Sink], SinkWriter] | None = None,
        side_sinks: dict[str, dict[str, list[Sink]]] | None = None,
    ) -> None:
        """``splits``: the source's; worker ``j`` reads every ``parallelism``-th from ``j``.
        ``open_sink``: how the operators' sinks are opened (the worker's ``OutputGate``);
        ``side_sinks``: the process functions' side outputs' (``outputs.tagged_sinks``)."""
        opener = open_sink or (lambda s: s.open())
        self._node_ops = node_ops  # per key_by node (its index), the operators it feeds
        self.ops = {rt.op.name: rt for rts in node_ops for rt in rts}
        self._clocked = {n: rt for n, rt in self.ops.items() if rt.processing_time}
        self.sinks: dict[str, list[SinkWriter]] = {
            name: [opener(s) for s in rt.op.sinks] for name, rt in self.ops.items()
        }
        self.side_sinks: dict[str, dict[str, list[SinkWriter]]] = {
            name: {tag: [opener(s) for s in sinks] for tag, sinks in tags.items()}
            for name, tags in (side_sinks or {}).items()
        }
        self.channels = Inputs([str(i) for i in range(parallelism)])
        for j in range(parallelism):
            if not splits[j::parallelism]:  # a worker without splits never holds time back
                self.channels.inputs[str(j)].ended = True
                self.channels.inputs[str(j)].watermark = MAX_WATERMARK

    @property
    def clocked(self) -> bool:
        """Does any operator run on processing time (fire on the clock, input or not)?"""
        return bool(self._clocked)

    def deliver(
        self, channel: str, keyed: list[KeyedBatch], trace: list[int], data_wm: int, status: int
    ) -> None:
        """Keyed records and watermark progress from one input channel."""
        others = self.channels.others(channel)
        arrived_trace = combine(trace, others)
        for node, keys, recs, ts, wms in keyed:
            arrived = combine(wms, others)
            for rt in self._node_ops[node]:
                rt.process(keys, recs, ts, arrived, arrived_trace)
        mark = self.channels.inputs[channel]
        mark.watermark = max(mark.watermark, trace[-1])
        mark.data_watermark = max(mark.data_watermark, data_wm)
        mark.ended = status == ENDED
        mark.idle = status == IDLE
        self.advance(arrived_trace)

    def advance(self, trace: list[int]) -> None:
        wm, data_wm = self.channels.watermark(), self.channels.data_watermark()
        for name, rt in self.ops.items():
            rt.advance(wm, data_wm, trace)
            self._emit(name, rt)

    def tick(self) -> None:
        wm, data_wm = self.channels.watermark(), self.channels.data_watermark()
        for name, rt in self._clocked.items():
            rt.advance(wm, data_wm)
            self._emit(name, rt)

    def _emit(self, name: str, rt: OperatorRuntime) -> None:
        results = rt.drain()
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
        for rt in self.ops.values():
            rt.flush()
            rt.purge(force=True)

    def flush_operators(self, purge: bool) -> None:
        for rt in self.ops.values():
            rt.flush()
            if purge:
                rt.purge()

    def snapshot_operators(self, barrier: bool) -> list[StateDelta]:
        """Every operator's unwritten state, frozen (no RocksDB work); the empty ones left out."""
        return [d for d in (rt.snapshot(barrier) for rt in self.ops.values()) if len(d)]

    def purge_operators(self) -> None:
        for rt in self.ops.values():
            rt.purge()

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

    def status(self, late: LateRecords) -> dict[str, OperatorStatus]:
        return {
            name: {
                "watermark": rt.watermark,
                "data_watermark": rt.data_watermark,
                "records_in": rt.records_in,
                "results_out": rt.results_out,
                "late": late.count[name],
                "open_windows": rt.open_windows,
                "top": rt.top_status(),
            }
            for name, rt in self.ops.items()
        }
