"""The checkpoint coordinator on its own, with real checkpoint storage under ``tmp_path``: a
pending checkpoint's acknowledgements (Flink's ``TaskAcknowledgeResult``), completion writing
``_metadata``, a decline, a timeout, a savepoint an API thread waits for; and barrier alignment
on the worker's side."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import wait_until
from weir import Job, agg, sources, windows
from weir.engine.errors import ConfigError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.coordinator import (
    AckResult,
    CheckpointCoordinator,
    CheckpointState,
    PendingCheckpoint,
    SavepointWaiter,
)
from weir.engine.runtime.messages import (
    CheckpointAck,
    CheckpointCompleted,
    CheckpointDecline,
    OperatorMarks,
    ToWorker,
    TriggerCheckpoint,
    WorkerSnapshot,
)
from weir.engine.runtime.task.barriers import BarrierAligner
from weir.state.keygroups import KeyGroupRange

RANGES = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]


def _snapshot(worker: int, watermark: int = 1_000) -> WorkerSnapshot:
    lo, hi = RANGES[worker].start, RANGES[worker].end
    return WorkerSnapshot(
        index=worker,
        key_groups=(lo, hi),
        sources={},
        operators={"op": OperatorMarks(watermark, watermark)},
        records_in=10,
        flush_ms=0.1,
        rocksdb_ms=0.2,
        sync_ms=0.3 + worker,
        files=(),
        size=100,
        incremental_size=40,
        async_ms=1.0,
    )


class Harness:
    """A coordinator whose broadcasts and publications are recorded."""

    def __init__(self, tmp_path: Path, **settings: int) -> None:
        job = Job("j")
        (
            job.source(sources.jsonl(tmp_path / "in.jsonl"))
            .key_by("id")
            .window(windows.tumbling(ms=1000))
            .aggregate("op", n=agg.count())
        )
        cfg = RunConfig(job_file=tmp_path / "job.py", state_dir=tmp_path / "state", **settings)
        self.sent: list[ToWorker] = []
        self.published = 0
        self.coordinator = CheckpointCoordinator(cfg, job, RANGES, self.sent.append, self._publish)
        self.coordinator.start()

    def _publish(self) -> None:
        self.published += 1

    def triggered(self) -> int:
        """Tick until a checkpoint is triggered; its id."""

        def trigger() -> int | None:
            self.coordinator.tick(ready=True, finished=False)
            found = [m.checkpoint for m in self.sent if isinstance(m, TriggerCheckpoint)]
            return found[-1] if found else None

        return wait_until(trigger, timeout=10, interval=0.01, what="a trigger")


def test_acknowledgements_are_counted_once_per_worker_while_pending() -> None:
    waiter = SavepointWaiter()
    pending = PendingCheckpoint(4, 2, [waiter])
    assert pending.savepoint and pending.state is CheckpointState.PENDING
    assert pending.acknowledge(0, _snapshot(0)) is AckResult.SUCCESS
    assert pending.acknowledge(0, _snapshot(0)) is AckResult.DUPLICATE
    assert pending.acknowledge(2, _snapshot(1)) is AckResult.UNKNOWN
    assert not pending.fully_acknowledged
    assert pending.acknowledge(1, _snapshot(1)) is AckResult.SUCCESS
    assert pending.fully_acknowledged
    pending.complete()
    assert pending.state is CheckpointState.COMPLETED and waiter.checkpoint == 4
    assert pending.acknowledge(1, _snapshot(1)) is AckResult.DISCARDED


def test_an_aborted_checkpoint_tells_its_waiters_it_failed() -> None:
    waiter = SavepointWaiter()
    pending = PendingCheckpoint(2, 1, [waiter])
    pending.abort()
    assert pending.state is CheckpointState.ABORTED
    assert waiter.done.is_set() and waiter.checkpoint is None
    assert pending.acknowledge(0, _snapshot(0)) is AckResult.DISCARDED


def test_every_acknowledgement_completes_the_checkpoint(tmp_path: Path) -> None:
    h = Harness(tmp_path, checkpoint_interval_ms=60_000)
    h.coordinator.tick(ready=False, finished=False)
    assert h.sent == []  # not every worker has reported yet
    n = h.triggered()
    h.coordinator.acknowledge(0, CheckpointAck(n, _snapshot(0, watermark=700)))
    h.coordinator.acknowledge(1, CheckpointAck(n + 1, _snapshot(1)))  # another checkpoint's
    assert h.coordinator.last_checkpoint is None
    h.coordinator.acknowledge(1, CheckpointAck(n, _snapshot(1, watermark=900)))
    assert h.coordinator.last_checkpoint == n and h.coordinator.pending is None
    assert h.sent[-1] == CheckpointCompleted(n) and h.published == 1
    meta = h.coordinator.storage.metadata(n)
    assert meta["watermark"] == 700 and meta["size"] == 200 and meta["sync_ms"] == 1.3
    assert [w["index"] for w in meta["workers"]] == [0, 1] and not meta["savepoint"]
    assert (
        h.coordinator.checkpoints[-1]["id"] == n and "workers" not in h.coordinator.checkpoints[-1]
    )
    h.coordinator.tick(ready=True, finished=False)
    assert h.sent[-1] == CheckpointCompleted(n)  # the next one is an interval away


def test_a_decline_fails_the_checkpoint_and_says_why(tmp_path: Path) -> None:
    h = Harness(tmp_path, checkpoint_interval_ms=1)
    n = h.triggered()
    h.coordinator.acknowledge(0, CheckpointAck(n, _snapshot(0)))
    h.coordinator.decline(1, CheckpointDecline(n, "upload failed: OSError: disk full"))
    assert h.coordinator.pending is None and h.coordinator.last_checkpoint is None
    why = "worker 1 declined: upload failed: OSError: disk full"
    assert h.coordinator.problem == f"checkpoint {n} failed: {why}"
    assert not h.coordinator.storage.chk_dir(n).joinpath("_metadata").exists()


def test_a_stuck_checkpoint_times_out(tmp_path: Path) -> None:
    h = Harness(tmp_path, checkpoint_interval_ms=60_000, checkpoint_timeout_ms=1)
    n = h.triggered()

    def timed_out() -> str | None:
        h.coordinator.tick(ready=True, finished=False)
        return h.coordinator.problem

    assert wait_until(timed_out, timeout=5) == f"checkpoint {n} failed: timed out after 1 ms"


def test_a_savepoint_waits_for_its_checkpoint(tmp_path: Path) -> None:
    h = Harness(tmp_path)  # no periodic checkpoints: only the savepoint triggers one
    result: dict[str, object] = {}
    asker = threading.Thread(target=lambda: result.update(h.coordinator.savepoint(10.0)))
    asker.start()
    n = h.triggered()
    for worker in (0, 1):
        h.coordinator.acknowledge(worker, CheckpointAck(n, _snapshot(worker)))
    asker.join(10.0)
    assert result == {"id": n, "path": str(h.coordinator.storage.chk_dir(n).resolve())}
    assert h.coordinator.storage.metadata(n)["savepoint"] is True


def test_a_savepoint_whose_checkpoint_fails_is_an_error(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    errors: list[Exception] = []

    def ask() -> None:
        try:
            h.coordinator.savepoint(10.0)
        except ConfigError as exc:
            errors.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    n = h.triggered()
    h.coordinator.decline(0, CheckpointDecline(n, "no space"))
    asker.join(10.0)
    with pytest.raises(ConfigError, match="savepoint of job 'j' failed; see the job's log"):
        raise errors[0]


def test_barrier_alignment_holds_frames_of_aligned_channels_until_the_snapshot() -> None:
    aligner = BarrierAligner(index=0, parallelism=3)
    assert aligner.begin(5) and not aligner.begin(5) and not aligner.begin(4)
    assert not aligner.aligned and not aligner.holds(1)
    aligner.arrived(1, 5)
    aligner.arrived(2, 4)  # an older barrier aligns nothing
    assert aligner.holds(1) and not aligner.holds(2) and not aligner.aligned
    aligner.hold(1, b"after-5")
    aligner.arrived(2, 5)
    assert aligner.aligned
    assert aligner.release() == [(1, b"after-5")]
    assert aligner.pending is None and not aligner.holds(1) and aligner.last == 5
