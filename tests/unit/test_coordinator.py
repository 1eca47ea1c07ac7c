"""The checkpoint coordinator on its own, with real checkpoint storage under ``tmp_path``: a
pending checkpoint's acknowledgements (Flink's ``TaskAcknowledgeResult``), completion writing
``_metadata``, a decline, a timeout, a savepoint an API thread waits for, a stop-with-savepoint
(its trigger stops the sources; a failure or the caller's deadline aborts it and tells the
workers, so the sources read again); and barrier alignment on the worker's side."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import chk_dir, wait_until
from weir import Job, agg, sources, windows
from weir.base.errors import ControlError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.coordinator import (
    AckResult,
    CheckpointCoordinator,
    CheckpointState,
    PendingCheckpoint,
    SavepointWaiter,
)
from weir.engine.runtime.messages import (
    CheckpointAborted,
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

    def __init__(
        self, tmp_path: Path, outputs: dict[str, int] | None = None, **settings: int
    ) -> None:
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
        self.coordinator = CheckpointCoordinator(
            cfg, job, RANGES, self.sent.append, self._publish, lambda: dict(outputs or {})
        )
        self.coordinator.start()

    def _publish(self) -> None:
        self.published += 1

    def ask_savepoint(self, timeout_s: float) -> tuple[threading.Thread, list[ControlError]]:
        """A savepoint asked for from a thread of its own, as an API thread asks; the list
        gets its refusal, if any."""
        refused: list[ControlError] = []

        def ask() -> None:
            try:
                self.coordinator.savepoint(timeout_s)
            except ControlError as exc:
                refused.append(exc)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        return asker, refused

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
    pending.abort("worker 0 declined: no space")
    assert pending.state is CheckpointState.ABORTED
    assert waiter.done.is_set() and waiter.checkpoint is None
    assert waiter.failure == "worker 0 declined: no space"
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
    assert h.sent[-1] == CheckpointAborted(n)
    why = "worker 1 declined: upload failed: OSError: disk full"
    assert h.coordinator.problem == f"checkpoint {n} failed: {why}"
    assert not chk_dir(h.coordinator.storage, n).joinpath("_metadata").exists()


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
    assert result == {"id": n, "path": str(chk_dir(h.coordinator.storage, n).resolve())}
    assert h.coordinator.storage.metadata(n)["savepoint"] is True


def test_a_savepoint_whose_checkpoint_fails_is_an_error(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    asker, errors = h.ask_savepoint(10.0)
    n = h.triggered()
    h.coordinator.decline(0, CheckpointDecline(n, "no space"))
    asker.join(10.0)
    with pytest.raises(ControlError, match="savepoint of job 'j' failed: worker 0 declined: no"):
        raise errors[0]


class Asker:
    """An API thread asking for a (stop-with-)savepoint; ``result`` or ``error`` once answered."""

    def __init__(self, h: Harness, timeout_s: float, stop: bool) -> None:
        self.result: dict[str, object] = {}
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._ask, args=(h, timeout_s, stop))
        self._thread.start()

    def _ask(self, h: Harness, timeout_s: float, stop: bool) -> None:
        try:
            self.result.update(h.coordinator.savepoint(timeout_s, stop=stop))
        except ControlError as exc:
            self.error = exc

    def join(self) -> None:
        self._thread.join(15.0)
        assert not self._thread.is_alive()


def test_a_stop_with_savepoint_stops_the_sources_at_its_barrier(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    asker = Asker(h, 10.0, stop=True)
    n = h.triggered()
    assert h.sent[-1] == TriggerCheckpoint(n, stop_sources=True)
    for worker in (0, 1):
        h.coordinator.acknowledge(worker, CheckpointAck(n, _snapshot(worker)))
    asker.join()
    assert asker.result["id"] == n and h.coordinator.storage.metadata(n)["savepoint"] is True
    assert not any(isinstance(m, CheckpointAborted) for m in h.sent)


def test_a_failed_stop_with_savepoint_lets_the_sources_read_again(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    asker = Asker(h, 10.0, stop=True)
    n = h.triggered()
    h.coordinator.decline(1, CheckpointDecline(n, "upload failed: OSError: disk full"))
    asker.join()
    assert h.sent[-1] == CheckpointAborted(n)
    with pytest.raises(ControlError, match="declined: upload failed.*; the job goes on"):
        raise asker.error or AssertionError("no error")


def test_a_stop_not_complete_at_its_deadline_is_aborted(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    asker = Asker(h, 0.2, stop=True)
    n = h.triggered()

    def aborted() -> bool:
        h.coordinator.tick(ready=True, finished=False)
        return h.sent[-1] == CheckpointAborted(n)

    wait_until(aborted, timeout=5, interval=0.01, what="the stop's checkpoint to be aborted")
    asker.join()
    with pytest.raises(ControlError, match=r"not complete at the stop's deadline \(0\.2 s"):
        raise asker.error or AssertionError("no error")
    h.coordinator.acknowledge(0, CheckpointAck(n, _snapshot(0)))  # too late: ignored
    assert h.coordinator.last_checkpoint is None


def test_a_stop_that_cannot_begin_by_its_deadline_is_never_triggered(tmp_path: Path) -> None:
    h = Harness(tmp_path, checkpoint_interval_ms=1, checkpoint_timeout_ms=60_000)
    periodic = h.triggered()  # in flight: the stop waits behind it
    asker = Asker(h, 0.2, stop=True)

    def answered() -> bool:
        h.coordinator.tick(ready=True, finished=False)  # the monitor thread's
        return asker.error is not None

    wait_until(answered, timeout=4, interval=0.01, what="the stop to be refused")
    asker.join()
    with pytest.raises(ControlError, match="could not begin before the stop's deadline"):
        raise asker.error or AssertionError("no error")
    for worker in (0, 1):
        h.coordinator.acknowledge(worker, CheckpointAck(periodic, _snapshot(worker)))
    h.coordinator.tick(ready=True, finished=False)
    h.coordinator.tick(ready=True, finished=False)
    stops = [m for m in h.sent if isinstance(m, TriggerCheckpoint) and m.stop_sources]
    assert stops == []


def test_closing_fails_every_savepoint_begun_or_not(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    first = Asker(h, 10.0, stop=False)
    h.triggered()
    second = Asker(h, 10.0, stop=True)
    wait_until(lambda: h.coordinator._savepoints, timeout=5, what="the second to be queued")
    h.coordinator.close("the job is being cancelled")
    first.join()
    second.join()
    assert first.error is not None and second.error is not None
    assert "failed: the job is being cancelled" in str(first.error)
    assert str(second.error).endswith("failed: the job is being cancelled")


def test_a_restart_fails_the_savepoint_in_flight(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    asker = Asker(h, 10.0, stop=False)
    h.triggered()
    h.coordinator.restarted()
    asker.join()
    with pytest.raises(ControlError, match="failed: the workers restarted after a failure"):
        raise asker.error or AssertionError("no error")


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


def test_a_restart_beginning_fails_every_savepoint_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    first = Asker(h, 30.0, stop=False)
    h.triggered()
    second = Asker(h, 30.0, stop=True)
    wait_until(lambda: h.coordinator._savepoints, timeout=5, what="the second to be queued")
    h.coordinator.fail_all("the job is restarting after a failure (worker 1 failed: boom)")
    first.join()
    second.join()
    for asker in (first, second):
        with pytest.raises(ControlError, match=r"failed: the job is restarting .*worker 1 failed"):
            raise asker.error or AssertionError("no error")
    assert h.coordinator.pending is None
    assert "checkpoint 1 failed: the job is restarting" in (h.coordinator.problem or "")


def test_metadata_records_each_file_outputs_offset(tmp_path: Path) -> None:
    h = Harness(tmp_path, {"/out/results.jsonl": 1234}, checkpoint_interval_ms=60_000)
    n = h.triggered()
    for worker in (0, 1):
        h.coordinator.acknowledge(worker, CheckpointAck(n, _snapshot(worker)))
    assert h.coordinator.storage.metadata(n)["outputs"] == {"/out/results.jsonl": 1234}


def test_a_declined_final_checkpoint_is_taken_again(tmp_path: Path) -> None:
    """A finished job's end state needs a checkpoint (file outputs past the last one are held
    until one completes): a worker still uploading the previous one declines the final one,
    which is then taken again an interval later, a bounded number of times in all."""
    h = Harness(tmp_path, checkpoint_interval_ms=50)
    co = h.coordinator

    def final_trigger(after: int) -> int:
        def trigger() -> int | None:
            co.tick(ready=True, finished=True)
            ids = [m.checkpoint for m in h.sent if isinstance(m, TriggerCheckpoint)]
            return ids[-1] if ids and ids[-1] > after else None

        return wait_until(trigger, timeout=10, interval=0.01, what="a final checkpoint")

    first = final_trigger(0)
    co.decline(1, CheckpointDecline(first, "checkpoint 0's upload is still running"))
    assert not co.final_settled()  # --exit-at-end waits for the retry
    again = final_trigger(first)
    co.acknowledge(0, CheckpointAck(again, _snapshot(0)))
    co.acknowledge(1, CheckpointAck(again, _snapshot(1)))
    assert co.last_checkpoint == again and co.final_settled()
    co.tick(ready=True, finished=True)
    assert [m for m in h.sent if isinstance(m, TriggerCheckpoint)][-1].checkpoint == again


def test_a_final_checkpoint_that_keeps_failing_settles_after_its_attempts(tmp_path: Path) -> None:
    from weir.engine.runtime.control.coordinator import FINAL_ATTEMPTS

    h = Harness(tmp_path, checkpoint_interval_ms=10)
    co = h.coordinator
    for _ in range(FINAL_ATTEMPTS):
        assert not co.final_settled()

        def trigger() -> int | None:
            co.tick(ready=True, finished=True)
            return None if co.pending is None else co.pending.id

        n = wait_until(trigger, timeout=10, interval=0.005, what="a final checkpoint")
        co.decline(0, CheckpointDecline(n, "no space"))
    assert co.final_settled()  # the job may end, saying why its last checkpoint failed
    assert co.problem is not None and "no space" in co.problem


def test_the_next_due_time_is_what_tick_would_act_on(tmp_path: Path) -> None:
    """``due_in`` tells the monitor thread how long it may wait with no message: nothing with
    checkpoints off, the interval's end, the pending checkpoint's timeout, and now for a
    savepoint asked for (the asker also wakes it) or a final checkpoint still to begin."""
    off = Harness(tmp_path / "off").coordinator
    assert off.due_in(finished=False) == float("inf")
    assert off.due_in(finished=True) == float("inf")  # no final checkpoint without checkpoints

    h = Harness(tmp_path / "on", checkpoint_interval_ms=60_000, checkpoint_timeout_ms=30_000)
    woken = threading.Event()
    h.coordinator.wake = woken.set
    assert h.coordinator.due_in(finished=False) == 0.0  # the first one is due at once
    n = h.triggered()
    assert 29.0 < h.coordinator.due_in(finished=False) <= 30.0  # its timeout
    for worker in (0, 1):
        h.coordinator.acknowledge(worker, CheckpointAck(n, _snapshot(worker)))
    assert 59.0 < h.coordinator.due_in(finished=False) <= 60.0  # the next interval's end
    assert h.coordinator.due_in(finished=True) == 0.0  # the final checkpoint begins now

    asker, refused = h.ask_savepoint(0.5)
    assert woken.wait(5.0), "a savepoint asked for wakes the monitor thread"
    assert h.coordinator.due_in(finished=False) == 0.0
    asker.join(5.0)  # not begun (no tick): its deadline ends it, and it is due no more
    assert refused and "did not complete in 0.5 s" in str(refused[0])
    assert 59.0 < h.coordinator.due_in(finished=False) <= 60.0
