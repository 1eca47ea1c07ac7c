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

from collections import Counter
from typing import Any

from weir.engine.job import Job
from weir.engine.nodes import ProcessNode
from weir.engine.runtime.config import RunConfig
from weir.engine.sinks import JsonlSink, Sink, SinkWriter
from weir.engine.sinks import from_url as sink_from_url


def side_sink(cfg: RunConfig, job: str, url: str | None, name: str) -> Sink:
    """A side output's sink: ``url`` when given, else ``<state-dir>/<job>/<name>``."""
    if url:
        return sink_from_url(url)
    return sink_from_url(f"file://{(cfg.job_dir(job) / name).resolve()}")


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


class DeadLetters(_SideOutput):
    """Records that could not be processed, with the stage and the reason."""

    def __init__(self, sink: Sink | None, gate: OutputGate | None = None) -> None:
        super().__init__(sink, gate)
        self.count = 0
        self.by_reason: Counter[str] = Counter()

    def add(self, stage: str, reason: str, item: Any) -> None:
        self.count += 1
        self.by_reason[stage] += 1
        self._pending.append({"stage": stage, "reason": reason, "input": _printable(item)})


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
