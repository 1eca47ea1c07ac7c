"""A worker's source side: its splits (every ``p``-th of the job's), read one batch at a
time in turn, through the chain; each split's watermark, idleness and end (``Inputs``), and
where each split is, for checkpoints. A job of several sources has a side per source
(``SourceSides``), each with its own chain, timestamps and watermarks: a side's outgoing
watermark is its source's, never combined with another source's.

A split's watermark only moves forward; a split quiet for the idle timeout stops holding the
watermark back until it has data again; an ended split holds the maximum watermark. The
worker's outgoing watermark is the minimum over its splits, carried after each record.

A stop-with-savepoint stops the source side at its barrier (``stop_at``): from then on nothing
is read, so no record, watermark or end of input follows the positions the barrier recorded,
and no window fires because of the stop. Those positions are then where a restore from the
savepoint starts, and what was emitted before the stop is never emitted again. The side reads
again only if that checkpoint is aborted (``resume``); once it completes, the job manager stops
the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from weir.engine.job import Job
from weir.engine.nodes import SourceNode
from weir.engine.runtime.messages import SplitPosition
from weir.engine.runtime.operators.columns import ColumnBatch
from weir.engine.runtime.task.chain import Chain, Keyed
from weir.engine.runtime.task.channels import Inputs, combine
from weir.engine.runtime.task.colchain import ColumnChain
from weir.engine.runtime.task.graph import SplitId, split_prefix
from weir.engine.runtime.task.routing import ACTIVE, ENDED, IDLE
from weir.engine.sources import SplitReader
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK


@dataclass(frozen=True, slots=True)
class Routable:
    """A batch's output: keyed sub-batches, the watermark after each record, the data
    watermark and this worker's input status, and whether the batch held records."""

    keyed: list[Keyed]
    trace: list[int]
    data_watermark: int
    status: int
    had_records: bool
    source: int = 0  # the index of the source read: watermarks travel per source


@dataclass(slots=True)
class SplitStart:
    """Where this worker's splits start: offsets (none: from the start), those that had ended
    (never reopened), and the max event time each had seen."""

    offsets: dict[str, int] = field(default_factory=dict)
    ended: dict[str, int] = field(default_factory=dict)
    max_ts: dict[str, int] = field(default_factory=dict)


class SourceSide:
    def __init__(
        self,
        node: SourceNode,
        chain: Chain,
        splits: list[str],
        idle_timeout_ms: int | None,
        *,
        index: int = 0,
        prefix: str = "",
    ) -> None:
        """``splits``: split ids, each ``prefix`` + the source's own split name (``graph``);
        ``index``: the source's in the job."""
        self.index = index
        self._prefix = prefix
        self._source = node.source
        self._chain = chain
        self.inputs = Inputs(splits)
        self.readers: dict[str, SplitReader] = {}
        self.ended_offsets: dict[str, int] = {}
        self._ended_readers: dict[str, SplitReader] = {}  # closed at the end: a final commit
        idle_ms = node.watermarks.idle_timeout_ms or idle_timeout_ms
        self._idle_s = idle_ms / 1000.0 if idle_ms else None
        self._last_data = {s: time.monotonic() for s in splits}
        self._order = list(splits)
        self._turn = 0
        self.first_record_at = 0.0
        self.stopped_at: int | None = None  # the stop-with-savepoint whose barrier stopped it

    def open(self, start: SplitStart) -> None:
        """Open every split that has not ended, at its offset."""
        self._chain.max_ts.update(start.max_ts)
        self.ended_offsets = dict(start.ended)
        self.readers = {
            s: self._source.open(s.removeprefix(self._prefix), start.offsets.get(s))
            for s in self.inputs.inputs
            if s not in start.ended
        }
        self._order = list(self.readers)

    @property
    def reading(self) -> bool:
        """Are there splits to read, and no stop-with-savepoint holding them?"""
        return bool(self.readers) and self.stopped_at is None

    def stop_at(self, checkpoint: int) -> None:
        """Read nothing more: ``checkpoint``'s barrier, a stop-with-savepoint's, passed here."""
        self.stopped_at = checkpoint

    def resume(self, checkpoint: int) -> None:
        """``checkpoint`` was aborted: if it stopped the reading, read again."""
        if self.stopped_at == checkpoint:
            self.stopped_at = None

    def read_next(self, batch_size: int) -> Routable:
        """Read one batch of the next split in turn and run it through the chain."""
        self._order = [s for s in self._order if s in self.readers]
        split = self._order[self._turn % len(self._order)]
        self._turn += 1
        reader = self.readers[split]
        start = reader.offset()
        chain = self._chain
        scale = chain.batch_scale if isinstance(chain, ColumnChain) else 1
        batch = reader.read_batch(batch_size * scale)
        chain.process(batch, split, start)
        mark = self.inputs.inputs[split]
        others = self.inputs.others(split)
        keyed: list[Keyed] = [
            item.arrived(others)
            if isinstance(item, ColumnBatch)
            else (item[0], item[1], item[2], item[3], combine(item[4], others))
            for item in chain.keyed
        ]
        trace = combine(chain.trace, others)
        mark.watermark = mark.data_watermark = chain.watermark(split)
        now = time.monotonic()
        if batch.items:
            self._last_data[split] = now
            mark.idle = False
            if not self.first_record_at:
                self.first_record_at = time.time()
        elif self._idle_s is not None and now - self._last_data[split] >= self._idle_s:
            mark.idle = True  # a quiet split stops holding the watermark back
        if batch.end:
            chain.ended(split)
            mark.watermark, mark.ended = MAX_WATERMARK, True
            self.ended_offsets[split] = reader.offset()
            self._ended_readers[split] = reader
            del self.readers[split]
        out_wm = self.inputs.watermark()
        if not trace or trace[-1] != out_wm:
            trace.append(out_wm)
        status = self.status()
        data_wm = self.inputs.data_watermark()
        return Routable(keyed, trace, data_wm, status, bool(batch.items), self.index)

    def status(self) -> int:
        """This worker's input status, as its channel to every worker carries it."""
        if self.inputs.all_ended():
            return ENDED
        live = [i for i in self.inputs.inputs.values() if not i.ended]
        return IDLE if all(i.idle for i in live) else ACTIVE

    def positions(self) -> dict[str, SplitPosition]:
        """Where every split is, for a checkpoint's barrier."""
        bound = self._chain.max_ts
        found = {
            s: SplitPosition(r.offset(), bound.get(s, MIN_WATERMARK), False)
            for s, r in self.readers.items()
        }
        for s, offset in self.ended_offsets.items():
            found[s] = SplitPosition(offset, bound.get(s, MIN_WATERMARK), True)
        return found

    def commit(self, positions: dict[str, SplitPosition]) -> None:
        """A checkpoint completed at ``positions``: tell the splits (Kafka commits the offsets
        to its group, for monitoring)."""
        for split, at in positions.items():
            reader = self.readers.get(split) or self._ended_readers.get(split)
            if reader is not None:
                reader.commit(at.offset)

    def lag(self) -> dict[str, int]:
        """Records each split has not read yet, for sources that know (Kafka partitions)."""
        found = {split: reader.lag() for split, reader in self.readers.items()}
        return {split: lag for split, lag in found.items() if lag is not None}

    def close(self) -> None:
        for reader in [*self.readers.values(), *self._ended_readers.values()]:
            reader.close()

    @property
    def records_in(self) -> int:
        return self._chain.records_in


class SourceSides:
    """The source sides of a job's several sources (one per source this worker has splits of),
    read in turn; one source works as ``SourceSide`` alone. Positions are keyed by split id,
    which names the source when there are several."""

    def __init__(self, sides: list[SourceSide]) -> None:
        self.sides = sides
        self._turn = 0
        self.stopped_at: int | None = None

    def open(self, starts: dict[int, SplitStart]) -> None:
        for side in self.sides:
            side.open(starts.get(side.index, SplitStart()))

    @property
    def reading(self) -> bool:
        return self.stopped_at is None and any(s.readers for s in self.sides)

    @property
    def split_ids(self) -> list[str]:
        return [split for side in self.sides for split in side.inputs.inputs]

    @property
    def first_record_at(self) -> float:
        return min((s.first_record_at for s in self.sides if s.first_record_at), default=0.0)

    @property
    def records_in(self) -> int:
        return sum(s.records_in for s in self.sides)

    def stop_at(self, checkpoint: int) -> None:
        self.stopped_at = checkpoint
        for side in self.sides:
            side.stop_at(checkpoint)

    def resume(self, checkpoint: int) -> None:
        if self.stopped_at == checkpoint:
            self.stopped_at = None
        for side in self.sides:
            side.resume(checkpoint)

    def read_next(self, batch_size: int) -> Routable:
        """One batch of the next source in turn that has splits to read."""
        live = [s for s in self.sides if s.readers]
        side = live[self._turn % len(live)]
        self._turn += 1
        return side.read_next(batch_size)

    def positions(self) -> dict[str, SplitPosition]:
        return {k: v for side in self.sides for k, v in side.positions().items()}

    def commit(self, positions: dict[str, SplitPosition]) -> None:
        for side in self.sides:
            side.commit(positions)

    def lag(self) -> dict[str, int]:
        return {k: v for side in self.sides for k, v in side.lag().items()}

    def close(self) -> None:
        for side in self.sides:
            side.close()


def source_sides(
    job: Job, mine: list[SplitId], chain: Callable[[SourceNode], Chain], idle_ms: int | None
) -> SourceSides:
    """A worker's source sides: one per source it has splits of (``mine``), each with its own
    chain (``chain(node)``)."""
    sides = []
    for i, node in enumerate(job.sources):
        ids = [s.id for s in mine if s.source == i]
        if ids:
            prefix = split_prefix(job, i)
            sides.append(SourceSide(node, chain(node), ids, idle_ms, index=i, prefix=prefix))
    return SourceSides(sides)
