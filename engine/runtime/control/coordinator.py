"""The checkpoint coordinator (Flink's ``CheckpointCoordinator``): triggers one checkpoint at a
time at every worker, collects each worker's acknowledgement in a ``PendingCheckpoint``, writes
``_metadata`` once all have acknowledged, and keeps the newest K. A savepoint is a checkpoint an
API thread asks for and waits on. A stop-with-savepoint's also stops the workers' sources at its
barrier; if it fails, the workers are told (``CheckpointAborted``) and read again, and a stop
whose caller gives up aborts it at the caller's deadline, so sources are never left stopped.

The job manager owns one, composed: the coordinator reaches the workers only through the
``broadcast`` and ``publish`` callables it is given. It runs on the job manager's monitor
thread, except ``savepoint``, which API threads call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from weir.base.errors import (
    ConfigError,
    ControlError,
    LeaseLost,
    SinkError,
    StateError,
    StorageConflict,
    StorageError,
)
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.leadership import Leadership
from weir.engine.runtime.control.resume import resume_point
from weir.engine.runtime.messages import (
    CheckpointAborted,
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    ToWorker,
    TriggerCheckpoint,
    WorkerSnapshot,
)
from weir.engine.runtime.view import CheckpointSummary, SavepointResult
from weir.engine.watermarks import MIN_WATERMARK
from weir.state import layout
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange

log = logging.getLogger(__name__)

RECENT = 100  # completed checkpoints kept in memory for the API
STOP_GRACE_S = 5.0  # how much longer than its deadline a stop's caller waits for the monitor
FINAL_ATTEMPTS = 5  # a finished job's final checkpoint, declined or failed, is taken again


class CheckpointState(Enum):
    PENDING = "pending"  # triggered; waiting for every worker's acknowledgement
    COMPLETED = "completed"  # every worker acknowledged and ``_metadata`` is written
    ABORTED = "aborted"  # declined, timed out, or its metadata could not be written


class AckResult(Enum):
    """What became of a worker's acknowledgement (Flink's ``TaskAcknowledgeResult``)."""

    SUCCESS = "success"
    DUPLICATE = "duplicate"  # the worker had acknowledged this checkpoint already
    UNKNOWN = "unknown"  # not a worker of this checkpoint
    DISCARDED = "discarded"  # the checkpoint is no longer pending


class SavepointWaiter:
    """An API thread waiting for its savepoint: resolved with the checkpoint id, or None and
    why when the checkpoint failed. ``stop``: a stop-with-savepoint's, aborted at ``deadline``
    (monotonic seconds) if not complete by then."""

    def __init__(self, stop: bool = False, deadline: float = float("inf")) -> None:
        self.stop = stop
        self.deadline = deadline
        self.done = threading.Event()
        self.checkpoint: int | None = None
        self.failure: str | None = None

    def resolve(self, checkpoint: int | None, failure: str | None = None) -> None:
        self.checkpoint = checkpoint
        self.failure = failure
        self.done.set()

    def expired(self, now: float) -> bool:
        return self.stop and now >= self.deadline


class PendingCheckpoint:
    """A triggered checkpoint: its acknowledgements so far, and who waits for it."""

    def __init__(
        self, checkpoint_id: int, parallelism: int, waiters: list[SavepointWaiter]
    ) -> None:
        self.id = checkpoint_id
        self.parallelism = parallelism
        self.waiters = waiters  # a savepoint's: a checkpoint someone waits for is a savepoint
        self.started = time.monotonic()
        self.time = now_ms()
        self.state = CheckpointState.PENDING
        self.acks: dict[int, WorkerSnapshot] = {}

    @property
    def savepoint(self) -> bool:
        return bool(self.waiters)

    @property
    def stops_sources(self) -> bool:
        return any(w.stop for w in self.waiters)

    @property
    def fully_acknowledged(self) -> bool:
        return len(self.acks) == self.parallelism

    def acknowledge(self, worker: int, snapshot: WorkerSnapshot) -> AckResult:
        if self.state is not CheckpointState.PENDING:
            return AckResult.DISCARDED
        if not 0 <= worker < self.parallelism:
            return AckResult.UNKNOWN
        if worker in self.acks:
            return AckResult.DUPLICATE
        self.acks[worker] = snapshot
        return AckResult.SUCCESS

    def timed_out(self, timeout_ms: int) -> str | None:
        """Why the checkpoint has run out of time (None: it has not)."""
        now = time.monotonic()
        if now - self.started > timeout_ms / 1000.0:
            return f"timed out after {timeout_ms} ms"
        stop = next((w for w in self.waiters if w.expired(now)), None)
        if stop is not None:
            waited = stop.deadline - self.started
            return f"not complete at the stop's deadline ({waited:.1f} s after it began)"
        return None

    def metadata(self, job: Job, ranges: list[KeyGroupRange]) -> dict[str, Any]:
        """``_metadata``'s content (every worker has acknowledged)."""
        workers = [self.acks[i] for i in range(self.parallelism)]
        return {
            "id": self.id,
            "job": job.name,
            "time": self.time,
            "savepoint": self.savepoint,
            "parallelism": self.parallelism,
            "max_parallelism": job.max_parallelism,
            "state_format": layout.STATE_FORMAT,
            "key_group_ranges": [r.to_json() for r in ranges],
            "size": sum(w.size for w in workers),
            "incremental_size": sum(w.incremental_size for w in workers),
            "duration_ms": round((time.monotonic() - self.started) * 1000, 3),
            "sync_ms": max(w.sync_ms for w in workers),
            "async_ms": max(w.async_ms for w in workers),
            "watermark": min(
                (m.watermark for w in workers for m in w.operators.values()),
                default=MIN_WATERMARK,
            ),
            "workers": [w.to_json() for w in workers],
        }

    def complete(self) -> None:
        self.state = CheckpointState.COMPLETED
        for waiter in self.waiters:
            waiter.resolve(self.id)

    def abort(self, why: str) -> None:
        self.state = CheckpointState.ABORTED
        for waiter in self.waiters:
            waiter.resolve(None, why)


class CheckpointCoordinator:
    def __init__(
        self,
        cfg: RunConfig,
        job: Job,
        ranges: list[KeyGroupRange],
        broadcast: Callable[[ToWorker], None],
        publish: Callable[[], None],
        outputs: Callable[[], dict[str, int]] = dict,
        leadership: Leadership | None = None,
    ) -> None:
        """``outputs``: each file output's size, read once every worker has acknowledged
        (``runtime.outputs``: nothing after the barrier is written before the completion).
        ``leadership``: the job manager's lease, through which every checkpoint is committed
        (None: unfenced, for tests of the coordinator alone)."""
        self._outputs = outputs
        self._leadership = leadership
        self._cfg = cfg
        self._job = job
        self._ranges = ranges
        self._broadcast = broadcast
        self._publish = publish
        self.storage = CheckpointStorage(cfg.checkpoints_root, job.name)
        self.checkpoints: list[CheckpointSummary] = []  # completed in this run, oldest first
        self.last_checkpoint: int | None = None
        self._last_meta: dict[str, Any] | None = None  # last_checkpoint's _metadata
        self.completed = 0
        self.problem: str | None = None  # why the last checkpoint failed, if it did
        self.pending: PendingCheckpoint | None = None
        self._next_id = 1
        self._next_trigger = 0.0
        self._savepoints: list[SavepointWaiter] = []
        self._lock = threading.Lock()  # guards ``_savepoints`` (API threads add to it)
        self._final_triggered = False
        self._final_id: int | None = None  # the final checkpoint's id, once triggered
        self._final_attempts = 0
        self._closed = False  # the job is ending: no savepoint will complete
        self._holds = 0  # live backfills ingesting: no checkpoint may begin (guarded by _lock)
        # called when a request needs the monitor thread (``tick``) now, not at its next look
        self.wake: Callable[[], None] = lambda: None

    def lead_by(self, leadership: Leadership) -> None:
        """Commit every checkpoint through ``leadership``, the job manager's lease."""
        self._leadership = leadership

    @property
    def enabled(self) -> bool:
        return self._cfg.checkpoint_interval_ms > 0

    def start(self) -> None:
        if self.enabled:
            self.storage.ensure()
        self._next_id = self.storage.next_id()

    def latest_complete(self) -> str | None:
        """Where a restart restores from: the newest restorable checkpoint of this run's
        lineage (the lease's), if checkpointing. With storage out of reach, the last one this
        run completed (the workers' restore then fails, or not, on its own; the restart
        strategy counts it)."""
        if not self.enabled:
            return None
        try:
            if self._leadership is None:
                n = self.storage.latest_valid()
                return self.storage.location(n) if n is not None else None
            found = resume_point(self.storage, self._leadership.record)
            return None if found is None else found[1]
        except (StorageError, ConfigError) as exc:
            n = self.last_checkpoint
            log.warning("job=%s restarts from checkpoint %s: %s", self._job.name, n, exc)
        return self.storage.location(n) if n is not None else None

    def metadata_at(self, location: str) -> dict[str, Any]:
        """The ``_metadata`` of the checkpoint at ``location``: the one this run completed last
        from memory (a restart must not need the storage for it), any other from storage."""
        last = self.last_checkpoint
        if last is not None and self._last_meta is not None:
            if location == self.storage.location(last):
                return self._last_meta
        storage, n = CheckpointStorage.at(location)
        return storage.metadata(n)

    def savepoint(self, timeout_s: float, stop: bool = False) -> SavepointResult:
        """Take a savepoint (a checkpoint never deleted) and wait for it to complete. ``stop``:
        its barrier also stops the sources, which read again if it fails or is not complete in
        ``timeout_s`` (the monitor thread aborts it then)."""
        kind = "stop-with-savepoint" if stop else "savepoint"
        waiter = SavepointWaiter(stop, time.monotonic() + timeout_s)
        with self._lock:
            self._savepoints.append(waiter)
        self.wake()  # the monitor thread, which begins it
        # a stop's waiter is resolved by the monitor thread at its deadline; the grace covers a
        # busy one
        if not waiter.done.wait(timeout_s + (STOP_GRACE_S if stop else 0.0)):
            with self._lock:
                queued = waiter in self._savepoints
                if queued:
                    self._savepoints.remove(waiter)
            raise ControlError(
                f"{kind} of job {self._job.name!r} did not complete in {timeout_s} s; "
                + ("see the job's log" if stop else "it may still complete; see weir checkpoints")
            )
        if waiter.checkpoint is None:
            goes_on = stop and not self._closed  # a stop's failure: the sources read again
            raise ControlError(
                f"{kind} of job {self._job.name!r} failed: {waiter.failure}"
                + ("; the job goes on" if goes_on else "")
            )
        n = waiter.checkpoint
        return {"id": n, "path": self.storage.location(n)}

    def tick(self, ready: bool, finished: bool) -> None:
        """Trigger the next checkpoint when it is due (one at a time; ``ready``: every worker
        has reported), time out a stuck one. Once ``finished``, one final checkpoint holds
        the end state and offsets."""
        now = time.monotonic()
        with self._lock:
            expired = [w for w in self._savepoints if w.expired(now)]
            self._savepoints = [w for w in self._savepoints if w not in expired]
            savepoint = bool(self._savepoints)
        for waiter in expired:  # the checkpoint before it ran until the stop's deadline
            waiter.resolve(None, "it could not begin before the stop's deadline")
        pending = self.pending
        if pending is not None:
            why = pending.timed_out(self._cfg.checkpoint_timeout_ms)
            if why is not None:
                self.abort(why)
            return
        periodic = self.enabled and time.monotonic() >= self._next_trigger
        # a retried final checkpoint waits the interval, as a periodic one after a failure
        final = (
            finished
            and self.enabled
            and not self._final_triggered
            and (self._final_attempts == 0 or now >= self._next_trigger)
        )
        if final:
            periodic = True
        elif finished:
            periodic = False
        if not ready or not (periodic or savepoint):
            return
        if self._trigger() and final:
            self._final_triggered = True  # not before: a backfill's hold defers it to a later tick
            self._final_attempts += 1
            self._final_id = self._next_id - 1

    def due_in(self, finished: bool) -> float:
        """Seconds until ``tick`` has something to do by the clock alone (0: now, inf: never);
        what the workers send (acknowledgements, their first status) is news of its own. A
        savepoint asked for, or a final checkpoint still to begin, is due now."""
        now = time.monotonic()
        with self._lock:
            if self._savepoints:
                return 0.0
        pending = self.pending
        if pending is not None:
            return max(0.0, pending.started + self._cfg.checkpoint_timeout_ms / 1000.0 - now)
        if not self.enabled:
            return math.inf
        if finished and not self._final_triggered and self._final_attempts == 0:
            return 0.0
        return max(0.0, self._next_trigger - now)

    def hold(self, timeout_s: float, stopping: threading.Event) -> None:
        """Begin no checkpoint until ``release``, and return once none is in flight (a live
        backfill ingests in between, so that every checkpoint holds it on all workers or on
        none). ``ControlError`` when the one in flight outlasts ``timeout_s``."""
        with self._lock:
            self._holds += 1  # from here on ``_trigger`` sets no new ``pending``
        deadline = time.monotonic() + timeout_s
        while (pending := self.pending) is not None:
            if time.monotonic() > deadline or stopping.is_set():
                self.release()
                raise ControlError(
                    f"checkpoint {pending.id} of job {self._job.name!r} was still in "
                    f"flight after {timeout_s} s; nothing was loaded, try again"
                )
            time.sleep(0.005)

    def release(self) -> None:
        with self._lock:
            self._holds = max(0, self._holds - 1)
        self.wake()  # a checkpoint the hold deferred may begin

    def _trigger(self) -> bool:
        """Begin the next checkpoint; False when a backfill's hold defers it."""
        waiters: list[SavepointWaiter] = []
        with self._lock:
            if self._holds:
                return False  # a backfill is ingesting; a later tick tries again
            waiters, self._savepoints = self._savepoints, []
            self.pending = PendingCheckpoint(self._next_id, len(self._ranges), waiters)
        self._next_id += 1
        try:
            self.storage.ensure(probe=False)
        except StateError as exc:  # storage unusable: this checkpoint fails, processing goes on
            self.abort(str(exc))
            return True
        self._broadcast(TriggerCheckpoint(self.pending.id, self.pending.stops_sources))
        return True

    def final_settled(self) -> bool:
        """With checkpoints on, a finished job ends after its final checkpoint (done or failed)."""
        if not self.enabled:
            return True
        return self._final_triggered and self.pending is None

    def acknowledge(self, worker: int, ack: CheckpointAck) -> None:
        pending = self.pending
        if pending is None or pending.id != ack.checkpoint:
            return  # a late reply to a checkpoint already aborted
        result = pending.acknowledge(worker, ack.snapshot)
        if result is not AckResult.SUCCESS:
            log.warning(
                "job=%s checkpoint=%d worker=%d acknowledgement %s",
                self._job.name,
                ack.checkpoint,
                worker,
                result.value,
            )
        elif pending.fully_acknowledged:
            self._complete(pending)

    def decline(self, worker: int, decline: CheckpointDecline) -> None:
        pending = self.pending
        if pending is not None and pending.id == decline.checkpoint:
            self.abort(f"worker {worker} declined: {decline.reason}")

    def _complete(self, pending: PendingCheckpoint) -> None:
        """Write ``_metadata`` (create-only, with the lease's epoch), then commit the
        checkpoint through the lease; only then are the workers told. A lease found lost
        raises ``LeaseLost`` and nothing is told: the job manager kills the workers, whose
        held outputs are never written."""
        meta = pending.metadata(self._job, self._ranges)
        lead = self._leadership
        try:
            meta["outputs"] = self._outputs()
            if lead is not None:
                meta["epoch"] = lead.epoch
                if not lead.valid():
                    raise LeaseLost(lead.lost or "its lease expired before the commit")
            self.storage.write_metadata(pending.id, meta)
            if lead is not None:
                lead.commit(pending.id)
        except StorageConflict as exc:
            self._next_id = max(self._next_id, self.storage.next_id())
            self.abort(f"another job manager wrote it: {exc}")
            return
        except (OSError, SinkError, StateError) as exc:
            self.abort(f"cannot write its metadata: {exc}")
            return
        self._last_meta = meta
        try:
            cache = self._cfg.sst_cache_path(self._job.name) if self.storage.store.remote else None
            keep = self._cfg.checkpoints_retained
            protect = set(lead.lineage.checkpoints[-keep:]) if lead is not None else set()
            self.storage.retain(keep, cache, protect)
        except (OSError, StateError) as exc:  # the checkpoint exists; the next retain retries
            log.warning(
                "job=%s checkpoint=%d retention failed: %s", self._job.name, pending.id, exc
            )
        self.pending = None
        self.last_checkpoint = pending.id
        self.completed += 1
        self.problem = None
        summary = {k: v for k, v in meta.items() if k != "workers"}
        self.checkpoints = [*self.checkpoints[-(RECENT - 1) :], summary]
        self._publish()  # before the savepoint's waiters return: API processes see it as done
        self._broadcast(CheckpointCompleted(pending.id))
        pending.complete()
        self._next_trigger = time.monotonic() + self._cfg.checkpoint_interval_ms / 1000.0
        log.info(
            "job=%s checkpoint=%d complete size=%d incremental=%d sync_ms=%.1f duration_ms=%.0f",
            self._job.name,
            pending.id,
            meta["size"],
            meta["incremental_size"],
            meta["sync_ms"],
            meta["duration_ms"],
        )

    def abort(self, why: str) -> None:
        pending, self.pending = self.pending, None
        if pending is None:
            return
        log.error("job=%s checkpoint=%d failed: %s", self._job.name, pending.id, why)
        self.problem = f"checkpoint {pending.id} failed: {why}"
        pending.abort(why)
        self._broadcast(CheckpointAborted(pending.id))  # sources it stopped read again
        self._next_trigger = time.monotonic() + self._cfg.checkpoint_interval_ms / 1000.0
        if pending.id == self._final_id and self._final_attempts < FINAL_ATTEMPTS:
            # the end state still has no checkpoint, and file outputs past the last one are
            # held until one completes: take it again (a worker still uploading the previous
            # checkpoint declines, and is done a moment later)
            self._final_triggered = False

    def close(self, why: str) -> None:
        """The job is ending: every savepoint asked for, begun or not, fails with ``why``."""
        self._closed = True
        self.fail_all(why)

    def fail_all(self, why: str) -> None:
        """The checkpoint in flight and every savepoint asked for, begun or not, fail now with
        ``why`` (a restart begins, or the job ends): their callers hear it at once."""
        pending, self.pending = self.pending, None
        if pending is not None:
            log.error("job=%s checkpoint=%d failed: %s", self._job.name, pending.id, why)
            self.problem = f"checkpoint {pending.id} failed: {why}"
            pending.abort(why)
        with self._lock:
            queued, self._savepoints = self._savepoints, []
        for waiter in queued:
            waiter.resolve(None, why)

    def restarted(self) -> None:
        """The workers were restarted: a checkpoint in flight fails (the new workers never saw
        it), and the final checkpoint may be taken again."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.abort("the workers restarted after a failure (see the job's log)")
        self._final_triggered = False
        self._final_id, self._final_attempts = None, 0
        self._next_trigger = time.monotonic() + self._cfg.checkpoint_interval_ms / 1000.0
