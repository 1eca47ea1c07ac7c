"""What the job manager judges and says of a run from its workers' statuses: whether the share
of the records read that went to the dead letters passed the run's ``max_dead_letter_ratio``
(Flink users set failure thresholds the same way), and the summary of a bounded run's end (its
dead letters by kind, the windows that retention dropped).

The limit is judged once ``dead_letter_min_records`` records were read, so the first few
records of a stream do not decide, and at the end of a bounded input however few were read.
Before that, a share above the limit is a problem ``/health`` reports (degraded); past it, the
job fails for good with ``DeadLetterLimit`` (a restart would read the same records again).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from weir.base.errors import DeadLetterLimit
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.messages import DeadLetterKind, WorkerStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetterShare:
    """The records the workers read and how many of them went to the dead letters."""

    dead: int
    records: int

    @property
    def percent(self) -> float:
        return 100.0 * self.dead / self.records if self.records else 0.0

    def __str__(self) -> str:
        return f"{self.dead} of {self.records} records read ({self.percent:.1f}%)"


def share(workers: list[WorkerStatus]) -> DeadLetterShare:
    return DeadLetterShare(
        sum(w["dead_letters"] for w in workers), sum(w["records_in"] for w in workers)
    )


def kinds(workers: list[WorkerStatus]) -> list[DeadLetterKind]:
    """Every kind of dead letter over the workers, most frequent first; each with the first
    record's reason and position as the lowest-numbered worker that saw the kind tells it."""
    found: dict[tuple[str, str], DeadLetterKind] = {}
    for w in workers:
        for k in w["dead_letter_kinds"]:
            seen = found.get((k["stage"], k["kind"]))
            if seen is None:
                found[(k["stage"], k["kind"])] = {**k}
            else:
                seen["count"] += k["count"]
    return sorted(found.values(), key=lambda k: (-k["count"], k["stage"], k["kind"]))


def _first(workers: list[WorkerStatus]) -> str:
    every = kinds(workers)
    if not every:
        return ""
    k = every[0]
    return f"stage={k['stage']} kind={k['kind']} at {k['at'] or 'a keyed operator'}: {k['reason']}"


class DeadLetterJudge:
    """The run's dead-letter limit (``max_dead_letter_ratio``; none: nothing is judged)."""

    def __init__(self, cfg: RunConfig, job: str, where: str) -> None:
        self.limit = cfg.max_dead_letter_ratio
        self.min_records = cfg.dead_letter_min_records
        self.job = job
        self.where = where  # where the dead letters go (a sink's description)

    def problem(self, workers: list[WorkerStatus]) -> str | None:
        """The share, when it is above the limit (not judged yet: it fails the job once it
        is); None without a limit or within it."""
        found = share(workers)
        if self.limit is None or not found.records or found.dead <= self.limit * found.records:
            return None
        return (
            f"{found} went to the dead letters, above the limit of {self.limit:g} "
            f"(max_dead_letter_ratio); the job fails if it still is at {self.min_records} records "
            f"or at the end of its input; the first: {_first(workers)}"
        )

    def verdict(self, workers: list[WorkerStatus], input_ended: bool) -> DeadLetterLimit | None:
        """The failure, when the share is judged (enough records read, or all of a bounded
        input) and above the limit."""
        found = share(workers)
        if self.limit is None or not found.records:
            return None
        if found.records < self.min_records and not input_ended:
            return None
        if found.dead <= self.limit * found.records:
            return None
        return DeadLetterLimit(
            f"job {self.job!r}: {found} went to the dead letters, more than "
            f"`max_dead_letter_ratio`={self.limit:g} allows; the first: {_first(workers)}; "
            f"every one is in {self.where}"
        )


def summarise(job: str, workers: list[WorkerStatus], where: str, retention_ms: int) -> None:
    """The end of a bounded run: a WARNING for its dead letters (how many of the records read,
    by kind, each kind's first reason and position) and one for each operator that retention
    dropped windows of (queries no longer find them)."""
    found = share(workers)
    if found.dead:
        said = "; ".join(
            f"{k['count']} at stage={k['stage']} kind={k['kind']} (first at "
            f"{k['at'] or 'a keyed operator'}: {k['reason']})"
            for k in kinds(workers)
        )
        log.warning(
            "job=%s input ended: dead_letters=%d of records_in=%d (%.1f%%) went to %s: %s",
            job, found.dead, found.records, found.percent, where, said,
        )  # fmt: skip
    dropped: dict[str, int] = {}
    for w in workers:
        for op, status in w["operators"].items():
            dropped[op] = dropped.get(op, 0) + status["retention_dropped"]
    for op, windows in dropped.items():
        if windows:
            log.warning(
                "job=%s op=%s retention dropped windows=%d: a window stays queryable for "
                "`state_retention_ms`=%d of event time after it closes, counted from the "
                "operator's watermark; to keep a historical input's windows, run with a "
                "retention longer than its span of event time",
                job, op, windows, retention_ms,
            )  # fmt: skip
