"""Keyed records to the workers that own their key groups, and the frames that carry them over
the exchange. Records for this worker's own key groups never leave the process. A broadcast
stream's records go to every worker, this one included, in the same frames; a forward
stream's (a broadcast function's non-keyed input) stay here.

An outbox gathers, per source batch, the keyed sub-batches for one other worker with the
sender's watermark after each record (an int64 array), its data watermark and its input status;
it is shipped when full, older than the buffer timeout, or carrying an end, encoded by
``framing`` (msgpack: data only). A checkpoint barrier travels alone in a frame, after everything
routed before it, with its checkpoint's options (a stop-with-savepoint's barrier stops the
sources of a worker it reaches before the job manager's trigger does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import numpy as np

from weir.base.errors import WorkerFailed
from weir.engine import kernels as kernel_choice
from weir.engine.runtime.operators.columns import ColumnBatch
from weir.engine.runtime.task import framing
from weir.engine.runtime.task.chain import Keyed
from weir.engine.runtime.task.exchange import Exchange
from weir.engine.runtime.task.framing import Entry, Unencodable, pack_ints
from weir.state.keygroups import key_groups

ACTIVE, IDLE, ENDED = 0, 1, 2  # a sender's input status, carried by every entry
MAX_PENDING_BYTES = 16 * 1024 * 1024  # outputs backed up past this pause the source
Deliver = Callable[[str, Sequence[Keyed], list[int], int, int, int], None]
DeadLetter = Callable[[str, Any], None]  # (reason, record)


@dataclass(frozen=True, slots=True)
class Barrier:
    """Checkpoint ``checkpoint``'s barrier; ``stop_sources``: a stop-with-savepoint's."""

    checkpoint: int
    stop_sources: bool


def decode_frame(
    payload: bytes, nodes: int, sources: int = 1, columns: dict[int, list[str]] | None = None
) -> list[Entry] | Barrier:
    """A frame's entries, or the checkpoint barrier it carries (``MessageError``: neither)."""
    found = framing.decode_frame(payload, nodes, sources, columns)
    return Barrier(*found) if isinstance(found, tuple) else found


@dataclass
class Outbox:
    """What waits to be shipped to one other worker."""

    entries: list[Entry] = field(default_factory=list)
    records: int = 0
    since: float = 0.0

    def add(self, entry: Entry, now: float) -> None:
        parts, _, _, status, source = entry
        last = self.entries[-1] if self.entries else None
        if last is None:
            self.since = now
        elif not parts and status == ACTIVE and not last[0] and not last[3] and last[4] == source:
            self.entries[-1] = entry  # only time moved: the last watermark is all that matters
            return
        self.entries.append(entry)
        self.records += rows_of(parts)


def rows_of(parts: Sequence[Keyed]) -> int:
    """How many rows keyed sub-batches hold."""
    return sum(len(p) if isinstance(p, ColumnBatch) else len(p[1]) for p in parts)


class Router:
    """Splits keyed batches by owner: this worker's part is delivered at once (``deliver``),
    the others' wait in outboxes until ``ship`` sends them."""

    def __init__(
        self,
        index: int,
        parallelism: int,
        max_parallelism: int,
        exchange: Exchange | None,
        batch_size: int,
        deliver: Deliver,
        dead_letter: DeadLetter | None = None,
        broadcast: frozenset[int] = frozenset(),
        forward: frozenset[int] = frozenset(),
    ) -> None:
        """``broadcast``: the nodes whose batches go whole to every worker (broadcast
        streams) instead of by key group; ``forward``: the nodes whose batches stay here (a
        broadcast function's non-keyed input)."""
        self._index = index
        self._broadcast = broadcast
        self._forward = forward
        self._p = parallelism
        self._m = max_parallelism
        self.exchange = exchange
        self._batch_size = batch_size
        self._deliver = deliver
        self._dead_letter = dead_letter
        self.outboxes = {j: Outbox() for j in range(parallelism) if j != index}
        self.records_sent = 0

    @property
    def backpressured(self) -> bool:
        return self.exchange is not None and self.exchange.pending_bytes > MAX_PENDING_BYTES

    def empty(self) -> bool:
        if any(box.entries for box in self.outboxes.values()):
            return False
        return self.exchange is None or self.exchange.pending_bytes == 0

    def route(
        self,
        keyed: list[Keyed],
        trace: list[int],
        data_wm: int,
        status: int,
        source: int = 0,
    ) -> None:
        """One source batch's keyed records, ``trace`` and status being ``source``'s."""
        if self.exchange is None:
            self._deliver(str(self._index), keyed, trace, data_wm, status, source)
            return
        parts: dict[int, list[Keyed]] = {j: [] for j in range(self._p)}
        m, p = self._m, self._p
        for batch in keyed:
            if isinstance(batch, ColumnBatch):
                self._split_columns(batch, parts)
                continue
            node, keys, recs, ts, wms = batch
            if node in self._broadcast:
                for part in parts.values():
                    part.append(batch)
                continue
            if node in self._forward:
                parts[self._index].append(batch)
                continue
            owners = [kg * p // m for kg in key_groups(keys, m)]
            for j in range(p):
                mask = list(map(j.__eq__, owners))
                if any(mask):
                    parts[j].append(
                        (
                            node,
                            list(compress(keys, mask)),
                            list(compress(recs, mask)),
                            list(compress(ts, mask)),
                            list(compress(wms, mask)),
                        )
                    )
        now = time.monotonic()
        packed = pack_ints(trace)
        for j, box in self.outboxes.items():
            box.add((parts[j], packed, data_wm, status, source), now)
        self._deliver(str(self._index), parts[self._index], trace, data_wm, status, source)

    def _split_columns(self, batch: ColumnBatch, parts: dict[int, list[Keyed]]) -> None:
        """A column batch's rows by the worker owning their key groups, computed in bulk
        (one CRC a row in a kernel, no interning)."""
        p = self._p
        owners = batch.keys.groups(kernel_choice.KERNELS, self._m) * p // self._m
        for j in range(p):
            rows = np.flatnonzero(owners == j)
            if len(rows) == len(batch):
                parts[j].append(batch)
                return
            if len(rows):
                parts[j].append(batch.take(rows))

    def ship(self, now: float, timeout_s: float) -> None:
        """Send buffers that are full, older than the buffer timeout, or carry an end."""
        if self.exchange is None:
            return
        for j, box in self.outboxes.items():
            if not box.entries:
                continue
            if (
                box.records >= self._batch_size
                or now - box.since >= timeout_s
                or box.entries[-1][3] != ACTIVE
            ):
                self._ship_box(j, box)

    def send_barrier(self, barrier: Barrier) -> None:
        """``barrier`` to every other worker, after everything routed so far."""
        if self.exchange is None:
            return
        frame = framing.encode_barrier(barrier.checkpoint, barrier.stop_sources)
        for j, box in self.outboxes.items():
            if box.entries:
                self._ship_box(j, box)
            self.exchange.send(j, frame)

    def _ship_box(self, j: int, box: Outbox) -> None:
        assert self.exchange is not None
        for frame in self._frames(box.entries):
            self.exchange.send(j, frame)
        self.records_sent += box.records
        box.entries, box.records = [], 0

    def _frames(self, entries: list[Entry]) -> list[bytes]:
        """``entries`` as frames of at most ``framing.MAX_FRAME`` bytes each. Records the
        exchange cannot carry (the chain sends them aside before, unless a source made them)
        go to the dead-letter output."""
        try:
            frame = framing.encode_entries(entries)
        except Unencodable:
            if self._dead_letter is None:
                raise
            entries = framing.drop_unencodable(entries, self._dead_letter)
            frame = framing.encode_entries(entries)
        if len(frame) <= framing.MAX_FRAME:
            return [frame]
        if len(entries) == 1:
            raise WorkerFailed(
                self._index,
                f"one source batch's records for another worker encode to {len(frame)} bytes, "
                f"over the exchange's {framing.MAX_FRAME}-byte frame limit; lower `batch_size`",
            )
        half = len(entries) // 2
        return self._frames(entries[:half]) + self._frames(entries[half:])
