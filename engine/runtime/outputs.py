"""Side outputs every worker has: dead letters (bad input) and late records.

Both are never silent: each record written carries its reason, and counters rise.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from weir.engine.runtime.config import RunConfig
from weir.engine.sinks import Sink, SinkWriter
from weir.engine.sinks import from_url as sink_from_url


def side_sink(cfg: RunConfig, job: str, url: str | None, name: str) -> Sink:
    """A side output's sink: ``url`` when given, else ``<state-dir>/<job>/<name>``."""
    if url:
        return sink_from_url(url)
    return sink_from_url(f"file://{(cfg.job_dir(job) / name).resolve()}")


def _printable(item: Any) -> Any:
    if isinstance(item, bytes | bytearray):
        return bytes(item).decode("utf-8", errors="replace").rstrip("\n")
    return item


class _SideOutput:
    """Buffers records and writes them to a sink on ``flush`` (none: counted only)."""

    def __init__(self, sink: Sink | None) -> None:
        self._writer: SinkWriter | None = sink.open() if sink else None
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

    def __init__(self, sink: Sink | None) -> None:
        super().__init__(sink)
        self.count = 0
        self.by_reason: Counter[str] = Counter()

    def add(self, stage: str, reason: str, item: Any) -> None:
        self.count += 1
        self.by_reason[stage] += 1
        self._pending.append({"stage": stage, "reason": reason, "input": _printable(item)})


class LateRecords(_SideOutput):
    """Records that arrived after their window's allowed lateness: kept, counted, never applied."""

    def __init__(self, sink: Sink | None) -> None:
        super().__init__(sink)
        self.count: Counter[str] = Counter()

    def add(self, op: str, key: str, ts: int, watermark: int, record: Any) -> None:
        self.count[op] += 1
        self._pending.append(
            {"op": op, "key": key, "ts": ts, "watermark": watermark, "record": record}
        )
