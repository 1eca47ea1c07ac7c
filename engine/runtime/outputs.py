"""What workers write: the side outputs every worker has (dead letters, late records), and the
gate that makes file outputs exactly-once.

Side outputs are never silent: each record written carries its reason, and counters rise.

File outputs (``JsonlSink``: results, stream sinks, side outputs) are shared by every worker,
so one byte offset can stand for "everything before checkpoint n" only if no worker writes a
byte of what follows barrier n before checkpoint n is complete. A worker's ``OutputGate``
therefore holds its file writes from its snapshot of checkpoint n until it hears that n
completed or was aborted (or barrier n+1 begins: the coordinator triggers n+1 only once n is
settled). When the last acknowledgement arrives, every worker has written all it emitted before
the barrier and nothing after, so the coordinator records each file's size in ``_metadata``
before it announces the completion; a restore cuts each file back to that size and the replay
writes the rest once more (the job manager's side: ``control.commits``). Other sinks are not
held: Kafka is flushed before a worker acknowledges (at-least-once), stdout cannot be cut.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from weir.engine.job import Job
from weir.engine.nodes import ProcessNode
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.messages import DeadLetterKind
from weir.engine.sinks import JsonlSink, Sink, SinkWriter
from weir.engine.sinks import from_url as sink_from_url

log = logging.getLogger(__name__)

WARN_EVERY_S = 30  # after a kind of dead letter's first WARNING, its count at most this often


def side_sink(cfg: RunConfig, job: str, url: str | None, name: str) -> Sink:
    """A side output's sink: ``url`` when given, else ``<state-dir>/<job>/<name>``."""
    if url:
        return sink_from_url(url)
    return sink_from_url(f"file://{(cfg.job_dir(job) / name).resolve()}")


def dead_letter_sink(cfg: RunConfig, job: Job) -> Sink:
    """Where the job's dead letters go: ``dead_letter_url``, else
    ``<state-dir>/<job>/dead-letter.jsonl``."""
    return side_sink(cfg, job.name, cfg.dead_letter_url, "dead-letter.jsonl")


def tagged_sinks(cfg: RunConfig, job: Job) -> dict[str, dict[str, list[Sink]]]:
    """Each process function's side outputs' sinks, by operator and tag: the ones the job
    attached, else ``<state-dir>/<job>/side-<operator>-<tag>.jsonl`` (like ``late.jsonl``)."""
    out: dict[str, dict[str, list[Sink]]] = {}
    for op in job.operators.values():
        if isinstance(op, ProcessNode) and op.side_outputs:
            out[op.name] = {
                tag: list(sinks) or [side_sink(cfg, job.name, None, f"side-{op.name}-{tag}.jsonl")]
                for tag, sinks in op.side_outputs.items()
            }
    return out


def _printable(item: Any) -> Any:
    if isinstance(item, bytes | bytearray):
        return bytes(item).decode("utf-8", errors="replace").rstrip("\n")
    return item


class _HeldWriter:
    """A file writer behind a gate: while the gate holds, batches wait in memory, in order."""

    def __init__(self, inner: SinkWriter) -> None:
        self._inner = inner
        self._held: list[dict[str, Any]] = []
        self.holding = False

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.holding:
            self._held.extend(records)
        else:
            self._inner.write(records)

    def flush(self) -> None:
        if not self.holding:
            self._inner.flush()

    def release(self) -> None:
        self.holding = False
        held, self._held = self._held, []
        if held:
            self._inner.write(held)  # one batch: one locked write loop
            self._inner.flush()

    def close(self) -> None:
        self.release()
        self._inner.close()


class OutputGate:
    """Opens a worker's sinks; holds its file outputs while a checkpoint is not settled."""

    def __init__(self) -> None:
        self._writers: list[_HeldWriter] = []
        self.holding: int | None = None  # the checkpoint whose completion the writes wait for
        self._settled = 0  # the newest checkpoint heard of as completed or aborted

    def open(self, sink: Sink) -> SinkWriter:
        if not isinstance(sink, JsonlSink):
            return sink.open()
        writer = _HeldWriter(sink.open())
        writer.holding = self.holding is not None
        self._writers.append(writer)
        return writer

    def hold(self, n: int) -> None:
        """This worker's snapshot of checkpoint ``n`` is taken: what it emits now waits."""
        if n <= self._settled:
            return  # aborted before this worker got to it: nothing will complete it
        self.holding = n
        for w in self._writers:
            w.holding = True

    def settled(self, n: int) -> None:
        """Checkpoint ``n`` completed or was aborted (or a barrier after it began)."""
        self._settled = max(self._settled, n)
        if self.holding is not None and self.holding <= n:
            self.release()

    def release(self) -> None:
        self.holding = None
        for w in self._writers:
            w.release()


class _SideOutput:
    """Buffers records and writes them to a sink on ``flush`` (none: counted only)."""

    def __init__(self, sink: Sink | None, gate: OutputGate | None = None) -> None:
        opener = gate.open if gate is not None else (lambda s: s.open())
        self._writer: SinkWriter | None = opener(sink) if sink else None
        self._pending: list[dict[str, Any]] = []

    def flush(self) -> None:
        if self._pending and self._writer is not None:
            self._writer.write(self._pending)
            self._writer.flush()
        self._pending.clear()

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.close()


@dataclass(slots=True)
class _Kind:
    """One (stage, kind of reason) of dead letters: how many, and the first one's story."""

    stage: str
    kind: str
    reason: str
    at: str
    count: int = 0
    said: int = 0  # the count when it was last logged


@dataclass(slots=True)
class _Reading:
    """The source batch the chain is working on: where the first dead letter of a kind came
    from is found in it (``DeadLetters.locate``)."""

    split: str
    start: Any  # the split's offset before the batch
    items: Sequence[Any]
    first_line: int | None
    decoded: list[Any] | None = None


def _index(items: Sequence[Any], item: Any) -> int | None:
    return next((i for i, x in enumerate(items) if x is item), None)


class DeadLetters(_SideOutput):
    """Records that could not be processed, with the stage and the reason; never silently.

    The first record of each (stage, kind of reason) is a WARNING naming both, the reason and
    where it was read (a file's line, a partition's offset); after that each kind's count is
    a WARNING at most every ``WARN_EVERY_S``; a split every record of which came here is a
    WARNING when it ends. ``add`` only counts: the lines are logged by ``flush``, which the
    worker calls once per flush interval, never per record.
    """

    def __init__(
        self, sink: Sink | None, gate: OutputGate | None = None, *, quiet: bool = False
    ) -> None:
        """``quiet``: written and counted, never logged (the backfill reports its counts in
        its own summary)."""
        super().__init__(sink, gate)
        self._quiet = quiet
        self._where = sink.describe() if sink is not None else "nowhere (counted only)"
        self.count = 0
        self.by_reason: Counter[str] = Counter()  # by stage (the status's by-stage counts)
        self._kinds: dict[tuple[str, str], _Kind] = {}
        self._new: list[_Kind] = []
        self._reading: _Reading | None = None
        self._split_dead: Counter[str] = Counter()
        self._split_first: dict[str, _Kind] = {}
        self._said_at = time.monotonic()

    def add(self, stage: str, kind: str, reason: str, item: Any) -> None:
        """Record ``item``, which failed at ``stage`` for ``reason``; ``kind`` names the sort
        of reason (``missing-field``, an exception's type), what its warnings are counted by."""
        self.count += 1
        self.by_reason[stage] += 1
        found = self._kinds.get((stage, kind))
        if found is None:
            found = _Kind(stage, kind, reason, self.locate(item))
            self._kinds[(stage, kind)] = found
            self._new.append(found)
        found.count += 1
        if self._reading is not None:
            self._split_dead[self._reading.split] += 1
            self._split_first.setdefault(self._reading.split, found)
        self._pending.append({"stage": stage, "reason": reason, "input": _printable(item)})

    # -- where records come from -------------------------------------------------------------

    def reading(self, split: str, start: Any, items: Sequence[Any], first_line: int | None) -> None:
        """The chain begins a batch of ``split`` read from offset ``start`` (one call a batch)."""
        self._reading = _Reading(split, start, items, first_line)

    def decoded(self, records: list[Any]) -> None:
        """The batch's lines decoded, one record each (a record is found by identity)."""
        if self._reading is not None:
            self._reading.decoded = records

    def done_reading(self) -> None:
        """The batch left the chain: what fails later (keyed operators) has no position."""
        self._reading = None

    def locate(self, item: Any) -> str:
        """Where ``item`` was read: ``split=… line=N`` (a file), ``split=… offset=S record=I``
        (the I-th record of the batch read from offset S), or the batch alone when a step
        before made a new record of it; "" outside a source batch."""
        r = self._reading
        if r is None:
            return ""
        i = _index(r.items, item)
        if i is None and r.decoded is not None and len(r.decoded) == len(r.items):
            i = _index(r.decoded, item)
        if i is None:
            return f"split={r.split} in the batch read from offset={r.start}"
        if r.first_line is not None:
            return f"split={r.split} line={r.first_line + i}"
        return f"split={r.split} offset={r.start} record={i}"

    # -- what is said --------------------------------------------------------------------------

    def split_ended(self, split: str, records: int) -> None:
        """``split`` ended after ``records`` records: a WARNING when every one came here."""
        dead = self._split_dead.pop(split, 0)
        first = self._split_first.pop(split, None)
        if first is not None and records and dead >= records and not self._quiet:
            log.warning(
                "split=%s ended and every one of its records=%d went to the dead letters "
                "(first: stage=%s kind=%s at %s: %s); nothing of it reached an operator: check "
                "the job's timestamp, key and functions against this input (records in %s)",
                split, records, first.stage, first.kind, first.at or "?", first.reason,
                self._where,
            )  # fmt: skip

    def flush(self) -> None:
        if not self._quiet:
            self.report(time.monotonic())
        super().flush()

    def report(self, now: float) -> None:
        """Log the kinds seen for the first time, and at most every ``WARN_EVERY_S`` the counts
        that grew since they were last logged."""
        for k in self._new:
            log.warning(
                "dead letter: stage=%s kind=%s first at %s: %s; it and every later one go to %s "
                "(counts follow at most every %d s)",
                k.stage, k.kind, k.at or "a keyed operator", k.reason, self._where,
                WARN_EVERY_S,
            )  # fmt: skip
            k.said = k.count
        self._new.clear()
        if now - self._said_at < WARN_EVERY_S:
            return
        for k in self._kinds.values():
            if k.count > k.said:
                log.warning(
                    "dead letters: stage=%s kind=%s more=%d in the last %.0f s, total=%d",
                    k.stage, k.kind, k.count - k.said, now - self._said_at, k.count,
                )  # fmt: skip
                k.said = k.count
        self._said_at = now

    def kinds(self) -> list[DeadLetterKind]:
        """Every kind seen, for the worker's status (the job manager sums them)."""
        return [
            {"stage": k.stage, "kind": k.kind, "count": k.count, "reason": k.reason, "at": k.at}
            for k in self._kinds.values()
        ]


class LateRecords(_SideOutput):
    """Records that arrived after their window's allowed lateness: kept, counted, never applied."""

    def __init__(self, sink: Sink | None, gate: OutputGate | None = None) -> None:
        super().__init__(sink, gate)
        self.count: Counter[str] = Counter()

    def add(self, op: str, key: str, ts: int, watermark: int, record: Any) -> None:
        self.count[op] += 1
        self._pending.append(
            {"op": op, "key": key, "ts": ts, "watermark": watermark, "record": record}
        )
