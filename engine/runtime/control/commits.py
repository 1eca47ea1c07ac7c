"""The job manager's side of exactly-once file outputs (``runtime.outputs`` has the workers'):
every sink a run writes, each file output's size for a checkpoint's ``_metadata``, and what a
start or a restart does to them: a run from nothing truncates them, a restore cuts each back to
its checkpoint's offset, and a restart without any checkpoint keeps them (the replay from the
start appends: at-least-once, as the log says).
"""

from __future__ import annotations

import logging
from typing import Any

from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.outputs import dead_letter_sink, side_sink, tagged_sinks
from weir.engine.runtime.task.graph import graph_of
from weir.engine.sinks import JsonlSink, Sink

log = logging.getLogger(__name__)


class JobOutputs:
    """The run's sinks, built once: ``positions`` runs at every checkpoint's completion."""

    def __init__(self, cfg: RunConfig, job: Job) -> None:
        self._job = job
        self._sinks = _all_sinks(cfg, job)
        # the outputs a checkpoint records an offset for, by absolute path
        self._files = {s.key: s for s in self._sinks if isinstance(s, JsonlSink)}

    def positions(self) -> dict[str, int]:
        """Each file output's size now: ``_metadata``'s ``outputs``."""
        return {key: s.position() for key, s in self._files.items()}

    def prepare(self) -> None:
        """A run from nothing: every output starts empty."""
        for sink in self._sinks:
            sink.prepare()

    def rewind_to(self, meta: dict[str, Any]) -> None:
        """File outputs back to where the checkpoint of ``meta`` (its ``_metadata``) left them:
        the replay writes the rest once more (exactly-once files; other sinks get it again:
        at-least-once). A file the checkpoint has no offset for (a new sink, an older
        checkpoint) keeps what it has, and the replay appends to it: at-least-once for that
        file, as the log says."""
        offsets: dict[str, int] = meta.get("outputs") or {}
        for key, sink in self._files.items():
            if key in offsets:
                self._rewind(sink, meta, int(offsets[key]))
            else:
                cut = sink.cut_torn_line()
                log.warning(
                    "job=%s checkpoint=%s has no offset for sink=%s; the replay appends to it "
                    "(at-least-once; removed a torn last line of %d bytes)",
                    self._job.name,
                    meta.get("id"),
                    sink.describe(),
                    cut,
                )

    def _rewind(self, sink: JsonlSink, meta: dict[str, Any], offset: int) -> None:
        cut = sink.rewind(offset)
        log.info(
            "job=%s checkpoint=%s sink=%s rewound to offset=%d (removed %d bytes)",
            self._job.name,
            meta.get("id"),
            sink.describe(),
            offset,
            cut,
        )

    def keep(self) -> None:
        """A restart without a checkpoint replays from the start and appends to what was
        written (at-least-once); only a torn last line is cut."""
        for sink in self._files.values():
            cut = sink.cut_torn_line()
            log.warning(
                "job=%s restarting without a checkpoint: sink=%s is kept and the replay appends "
                "to it (at-least-once; removed a torn last line of %d bytes)",
                self._job.name,
                sink.describe(),
                cut,
            )


def _all_sinks(cfg: RunConfig, job: Job) -> list[Sink]:
    """Every sink the workers will open: results, stream sinks, side outputs (dead letters,
    late records, process functions' tags)."""
    found: list[Sink] = [s for op in job.operators.values() for s in op.sinks]
    found += [n.sink for n in graph_of(job).sinks]  # a union shares its sinks
    found.append(dead_letter_sink(cfg, job))
    found.append(side_sink(cfg, job.name, cfg.late_sink_url, "late.jsonl"))
    found += [s for tags in tagged_sinks(cfg, job).values() for ss in tags.values() for s in ss]
    return found
