"""The job manager's side of exactly-once file outputs (``runtime.outputs`` has the workers'):
every sink a run writes, each file output's size for a checkpoint's ``_metadata``, and what a
start or a restart does to them: a run from nothing truncates them, a restore cuts each back to
its checkpoint's offset, and a restart without any checkpoint keeps them (the replay from the
start appends: at-least-once, as the log says).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.outputs import side_sink
from weir.engine.runtime.task.chain import sink_nodes
from weir.engine.sinks import JsonlSink, Sink
from weir.state.checkpoints import CheckpointStorage

log = logging.getLogger(__name__)


class JobOutputs:
    def __init__(self, cfg: RunConfig, job: Job) -> None:
        self._cfg = cfg
        self._job = job

    def sinks(self) -> list[Sink]:
        """Every sink the workers will open: results, stream sinks and side outputs."""
        cfg, job = self._cfg, self._job
        found: list[Sink] = [s for op in job.operators.values() for s in op.sinks]
        found += [n.sink for n in sink_nodes(job.sources[0])]
        found.append(side_sink(cfg, job.name, cfg.dead_letter_url, "dead-letter.jsonl"))
        found.append(side_sink(cfg, job.name, cfg.late_sink_url, "late.jsonl"))
        return found

    def positions(self) -> dict[str, int]:
        """Each file output's size now: ``_metadata``'s ``outputs``."""
        return output_positions(self.sinks())

    def prepare(self) -> None:
        """A run from nothing: every output starts empty."""
        for sink in self.sinks():
            sink.prepare()

    def rewind_to(self, chk: str) -> None:
        """File outputs back to where checkpoint ``chk`` left them: the replay writes the rest
        once more (exactly-once files; other sinks get it again: at-least-once)."""
        storage, n = CheckpointStorage.at(chk)
        meta = storage.metadata(n)
        rewind_outputs(self.sinks(), meta, self._job.name)

    def keep(self) -> None:
        keep_outputs(self.sinks(), self._job.name)


def file_outputs(sinks: Iterable[Sink]) -> dict[str, JsonlSink]:
    """The outputs a checkpoint records an offset for, by absolute path."""
    return {s.key: s for s in sinks if isinstance(s, JsonlSink)}


def output_positions(sinks: Iterable[Sink]) -> dict[str, int]:
    """Each file output's size now: ``_metadata``'s ``outputs``."""
    return {key: s.position() for key, s in file_outputs(sinks).items()}


def rewind_outputs(sinks: Iterable[Sink], meta: dict[str, Any], job: str) -> None:
    """Cut each file output back to the offset checkpoint ``meta`` recorded for it. A file the
    checkpoint has no offset for (a new sink, an older checkpoint) keeps what it has, and the
    replay appends to it: at-least-once for that file, as the log says."""
    offsets: dict[str, int] = meta.get("outputs") or {}
    for key, sink in file_outputs(sinks).items():
        if key in offsets:
            cut = sink.rewind(int(offsets[key]))
            log.info(
                "job=%s checkpoint=%s sink=%s rewound to offset=%d (removed %d bytes)",
                job,
                meta.get("id"),
                sink.describe(),
                int(offsets[key]),
                cut,
            )
        else:
            cut = sink.cut_torn_line()
            log.warning(
                "job=%s checkpoint=%s has no offset for sink=%s; the replay appends to it "
                "(at-least-once; removed a torn last line of %d bytes)",
                job,
                meta.get("id"),
                sink.describe(),
                cut,
            )


def keep_outputs(sinks: Iterable[Sink], job: str) -> None:
    """A restart without a checkpoint replays from the start and appends to what was written
    (at-least-once); only a torn last line is cut."""
    for sink in file_outputs(sinks).values():
        cut = sink.cut_torn_line()
        log.warning(
            "job=%s restarting without a checkpoint: sink=%s is kept and the replay appends to "
            "it (at-least-once; removed a torn last line of %d bytes)",
            job,
            sink.describe(),
            cut,
        )
