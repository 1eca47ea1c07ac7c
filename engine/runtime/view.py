"""What the API reads of a running job, whether its job manager runs in the same process
(``control.jobmanager.JobManager``) or in another one (``api.remote.RemoteRuntime``, which reads
the ``jobmanager.json`` it publishes): the ``JobRuntime`` Protocol both implement, and
``JobStatus``, that file's typed shape. Nothing here imports a runtime, so the API imports it
freely.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import orjson

from weir.base.errors import MessageError
from weir.base.jsonenc import dumps_json
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.wire import from_plain, to_plain
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import KeyGroupRange

STATUS_FORMAT = 6  # jobmanager.json's layout; a reader refuses any other
# What a job can be in. ``unknown``: seen from another process, its job manager stopped
# publishing without saying it ended (``JobStatus.seen_state``).
JOB_STATES = ("starting", "running", "finished", "failed", "stopped", "cancelled", "unknown")

# A completed checkpoint as its ``_metadata`` says, without the per-worker part (the format
# ``state/checkpoints.py`` writes and ``GET /jobs/{job}/checkpoints`` lists).
CheckpointSummary = dict[str, Any]


class BackfillEntry(TypedDict):
    """A backfill loaded into the running job."""

    op: str
    min_end: int
    max_end: int
    windows: int | None
    time: int


class SavepointResult(TypedDict):
    id: int
    path: str


class JobRuntime(Protocol):
    """What the API reads of a job manager (read-only), and its two admin operations."""

    @property
    def parallelism(self) -> int: ...

    @property
    def ranges(self) -> list[KeyGroupRange]: ...

    @property
    def generation(self) -> int:
        """Bumped by every restart (and, seen from ``weir api``, every new run): readers of
        the workers' state reopen."""
        ...

    @property
    def source(self) -> str: ...

    @property
    def storage(self) -> CheckpointStorage: ...

    @property
    def last_checkpoint(self) -> int | None: ...

    @property
    def completed_checkpoints(self) -> int: ...

    @property
    def checkpoints(self) -> list[CheckpointSummary]:
        """Completed in this run, oldest first."""
        ...

    @property
    def checkpoint_problem(self) -> str | None:
        """Why the last checkpoint failed (None when it did not)."""
        ...

    @property
    def status_problem(self) -> str | None:
        """Why the API cannot vouch for the job's status (None when it can)."""
        ...

    @property
    def failure_reason(self) -> str | None:
        """Why the job stopped for good (None unless its state is failed)."""
        ...

    @property
    def dead_letter_problem(self) -> str | None:
        """Why the share of records sent to the dead letters needs a look: it is above the
        run's ``max_dead_letter_ratio``, not judged yet (None: no limit, or within it)."""
        ...

    @property
    def state_retention_ms(self) -> int:
        """How long fired windows stay queryable, in event time, past their allowed lateness."""
        ...

    @property
    def restarts(self) -> int: ...

    @property
    def restored_from(self) -> str | None: ...

    @property
    def backfills(self) -> list[BackfillEntry]: ...

    def worker_status(self) -> list[WorkerStatus]:
        """One entry per worker, by index (``unreported`` until the worker reports)."""
        ...

    def operator_watermark(self, op: str) -> int:
        """``op``'s watermark: the minimum over its workers (``MIN_WATERMARK`` until each
        reported one)."""
        ...

    def state_watermark(self, op: str) -> int:
        """``op``'s watermark as of what its workers' RocksDB holds, which live reads answer
        from: every change made before it is there (it trails ``operator_watermark`` by what
        waits for the next state flush)."""
        ...

    def state(self) -> str:
        """One of ``JOB_STATES``: starting, running, finished, failed, stopped, cancelled (or,
        from ``weir api``, unknown)."""
        ...

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult: ...

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry: ...


@runtime_checkable
class ClusterRuntime(Protocol):
    """A job manager whose workers may run on a cluster and then serve their live state
    themselves (``on_cluster``)."""

    @property
    def on_cluster(self) -> bool: ...

    def state_endpoint(self, index: int) -> tuple[str | None, PeerAuth | None]:
        """Where worker ``index`` serves its state (``tcp:host:port``; None until it said),
        and the attempt's secret that proves the job manager to it."""
        ...


@dataclass(frozen=True, slots=True)
class JobStatus:
    """``jobmanager.json``: everything ``JobRuntime`` answers, for API processes apart from the
    job manager. ``written_at`` (epoch ms) tells a reader how old it is."""

    format: int
    job: str
    run_id: str
    pid: int
    written_at: int
    state: str
    failure: str | None  # why it failed for good (None unless state is failed)
    source: str
    operators: list[str]
    parallelism: int
    max_parallelism: int
    ranges: list[tuple[int, int]]
    generation: int
    restarts: int
    last_checkpoint: int | None
    completed_checkpoints: int
    checkpoints: list[CheckpointSummary]
    checkpoint_problem: str | None
    restored_from: str | None
    backfills: list[BackfillEntry]
    workers: list[WorkerStatus]
    control_port: int | None  # the admin control channel's, while the job runs
    api_url: str | None  # where ``weir run`` serves the HTTP API (None: it serves none)
    cluster: bool  # the workers run on a cluster (``--master``): they serve their live state
    ended: bool  # the job manager's last word: it has stopped the job and exits
    dead_letter_problem: str | None = None  # the dead-letter share is above the run's limit
    state_retention_ms: int = 0  # the run's --state-retention-ms (the 404's retention hint)

    def age_s(self, now_ms: int) -> float:
        return (now_ms - self.written_at) / 1000.0

    def seen_state(self, now_ms: int, stale_after_s: float) -> str:
        """The state as a reader should take it: what the job manager last said if that was
        its last word (it ended, or failed for good) or is recent; else ``unknown`` (it is
        gone or stuck without saying so)."""
        if self.ended or self.state == "failed" or self.age_s(now_ms) <= stale_after_s:
            return self.state
        return "unknown"

    def to_json(self) -> bytes:
        """orjson writes dataclasses and tuples itself (in C: this runs every publication); a
        status holding an int past 64 bits (a window's exact sum) takes the slow path."""
        try:
            return orjson.dumps(self, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:
            return dumps_json(to_plain(self))

    @staticmethod
    def from_json(raw: bytes) -> JobStatus:
        """The status a job manager wrote (``MessageError`` names what does not fit)."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise MessageError(f"the job status is not JSON: {exc}") from None
        found = body.get("format") if isinstance(body, dict) else None
        if found != STATUS_FORMAT:
            raise MessageError(
                f"the job status has format {found!r}, this weir reads {STATUS_FORMAT}; run "
                "weir api from the same installation as weir run"
            )
        return from_plain(JobStatus, body, "jobmanager.json")


def unreported(worker: int, key_groups: KeyGroupRange) -> WorkerStatus:
    """A worker's status before its first report: nothing read, no watermark yet."""
    return {
        "worker": worker,
        "host": "",
        "pid": 0,
        "memory": {},
        "key_groups": (key_groups.start, key_groups.end),
        "splits": [],
        "source_lag": {},
        "watermark": MIN_WATERMARK,
        "records_in": 0,
        "records_sent": 0,
        "records_received": 0,
        "backpressure": 0.0,
        "pending_bytes": 0,
        "dead_letters": 0,
        "dead_letters_by_stage": {},
        "dead_letter_kinds": [],
        "finished": False,
        "restored_from": None,
        "run_started_at": 0.0,
        "first_record_at": 0.0,
        "finished_at": 0.0,
        "operators": {},
        "time": 0.0,
    }


def operator_watermark(
    workers: list[WorkerStatus],
    op: str,
    which: Literal["watermark", "state_watermark"] = "watermark",
) -> int:
    """An operator's watermark (``which``: or the one of what its RocksDB holds): the minimum
    over its workers (MIN until all reported it)."""
    marks = []
    for st in workers:
        found = st["operators"].get(op)
        if found is None:
            return MIN_WATERMARK
        marks.append(found[which])
    return min(marks) if marks else MIN_WATERMARK


__all__ = [
    "JOB_STATES",
    "STATUS_FORMAT",
    "BackfillEntry",
    "CheckpointSummary",
    "ClusterRuntime",
    "JobRuntime",
    "JobStatus",
    "SavepointResult",
    "operator_watermark",
    "unreported",
]
