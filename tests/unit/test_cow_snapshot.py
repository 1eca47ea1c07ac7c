"""Copy-on-write checkpoints: a barrier freezes each operator's unwritten state, the state
writer writes it and takes RocksDB's checkpoint, and nothing the operators do after the barrier
reaches that checkpoint. Real RocksDB files under ``tmp_path``, the real state writer and
checkpoint storage; a RocksDB whose writes wait for a gate holds a generation "being written"
as long as a test needs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.base.errors import StateError, WorkerFailed
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.messages import CheckpointAck, CheckpointDecline, FromWorker
from weir.engine.runtime.operators.base import OperatorRuntime
from weir.engine.runtime.operators.factory import runtime_for
from weir.engine.runtime.operators.session import SessionRuntime
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import decode_state, decode_window
from weir.engine.runtime.task.snapshot import Snapshotter
from weir.state import layout
from weir.state.backend import Batch
from weir.state.keygroups import range_for_operator
from weir.state.rocksdb import RocksState

KEYS = range_for_operator(128, 1, 0)


class Counter:
    """A user-defined aggregate whose accumulator changes in place."""

    def create(self) -> Any:
        return {"n": 0}

    def add(self, acc: Any, value: Any) -> Any:
        acc["n"] += 1
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return {"n": a["n"] + b["n"]}

    def result(self, acc: Any) -> Any:
        return acc["n"]


class GatedState(RocksState):
    """A real RocksDB whose commits wait for ``gate`` (set: they go through at once); a fault
    can be set for the next commit or checkpoint."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()  # a commit is held at the gate
        self.fail_commit: str | None = None
        self.fail_checkpoint: str | None = None

    def commit(self, batch: Batch) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            assert self.gate.wait(30)
        if self.fail_commit is not None:
            raise StateError(self.fail_commit)
        super().commit(batch)

    def checkpoint(self, target: Path) -> None:
        if self.fail_checkpoint is not None:
            raise StateError(self.fail_checkpoint)
        super().checkpoint(target)


def _runtime(state: RocksState, assigner: Any, aggs: dict[str, Any] | None = None) -> Any:
    job = Job("j")
    (
        job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
        .key_by("id")
        .window(assigner)
        .aggregate("op", **(aggs or {"n": agg.count(), "total": agg.sum("v")}))
    )
    return runtime_for(
        job.operators["op"], state, KEYS, 128, LateRecords(None), DeadLetters(None), 10**9
    )


def _feed(rt: OperatorRuntime, *keys: str, ts: int = 10) -> None:
    recs = [{"id": k, "ts": ts, "v": 5} for k in keys]
    rt.process(list(keys), recs, [ts] * len(keys), [0] * len(keys))


def _stored(rt: WindowRuntime, sid: int) -> dict[str, list[Any]]:
    """``key -> slots`` as RocksDB holds them (one window per key in these tests): sessions
    as rows, other windows as cells."""
    if isinstance(rt, SessionRuntime):
        return {key: decode_window(raw) for key, _, raw in rt.stored_rows(sid)}
    return {key: slots for key, _, slots in rt.stored_windows(sid)}


ASSIGNERS = {
    "tumbling": (windows.tumbling(ms=100), "state_id", lambda s: s[0]),
    "sliding": (windows.sliding(size_ms=100, slide_ms=50), "pane_state_id", lambda s: s[0]),
    "session": (windows.session(gap_ms=100), "state_id", lambda s: s[1]),  # [start, *slots]
}


@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_a_snapshot_holds_the_state_of_its_barrier_whatever_the_fold_does_next(
    tmp_path: Path, kind: str
) -> None:
    """The fold changes accumulators in place after the barrier; the frozen generation, written
    later, still holds the counts of the barrier (a snapshot that kept references would hold
    the newer counts)."""
    assigner, sid_attr, count_of = ASSIGNERS[kind]
    state = RocksState(tmp_path / "db")
    rt = _runtime(state, assigner)
    sid = getattr(rt.op, sid_attr)
    _feed(rt, "a", "b")
    frozen = rt.snapshot()
    _feed(rt, "a", "a", "c")  # after the barrier
    assert _stored(rt, sid) == {}  # nothing written yet: the snapshot did no RocksDB work
    frozen.write(state)
    assert {k: count_of(v) for k, v in _stored(rt, sid).items()} == {"a": 1, "b": 1}
    rt.flush()  # the next generation
    assert {k: count_of(v) for k, v in _stored(rt, sid).items()} == {"a": 3, "b": 1, "c": 1}
    state.close()


def test_a_user_defined_accumulator_changed_in_place_is_frozen_too(tmp_path: Path) -> None:
    state = RocksState(tmp_path / "db")
    rt = _runtime(state, windows.tumbling(ms=100), {"n": agg.custom(Counter())})
    _feed(rt, "a")
    frozen = rt.snapshot()
    _feed(rt, "a", "a")
    frozen.write(state)
    assert _stored(rt, rt.op.state_id) == {"a": [{"n": 1}]}
    state.close()


def test_a_process_function_reads_its_newest_state_while_a_generation_is_unwritten(
    tmp_path: Path,
) -> None:
    """New cell, then the frozen generation, then RocksDB: a read after the barrier sees the
    value the function set last, never RocksDB's older one."""
    state = RocksState(tmp_path / "db")
    job = Job("j")

    def count(rec: Any, ctx: Any) -> None:
        seen = ctx.value("seen")
        seen.set(seen.get(0) + 1)

    (
        job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
        .key_by("id")
        .process(count, name="op")
    )
    rt = runtime_for(
        job.operators["op"], state, KEYS, 128, LateRecords(None), DeadLetters(None), 10**9
    )

    def stored() -> Any:
        for kg in KEYS:
            prefix = layout.state_prefix(kg, rt.op.state_id)
            for _, raw in state.scan(prefix, layout.prefix_upper_bound(prefix)):
                return decode_state(raw)[2]
        return None

    rt.process(["a"], [{"id": "a"}], [1], [0])
    frozen = rt.snapshot()
    rt.process(["a"], [{"id": "a"}], [2], [0])  # reads "seen" while RocksDB has nothing
    frozen.write(state)
    assert stored() == 1  # the barrier's value
    rt.flush()
    assert stored() == 2
    state.close()


# -- the snapshotter and its state writer -----------------------------------------------------


class Harness:
    """A worker's snapshot side: a window operator on a gated RocksDB, the real snapshotter
    (state writer, RocksDB checkpoint, upload into a local checkpoint directory)."""

    def __init__(self, tmp_path: Path) -> None:
        self.cfg = RunConfig(job_file=Path("-"), state_dir=tmp_path / "state")
        self.state = GatedState(self.cfg.worker_state_path("j", 0))
        self.rt = _runtime(self.state, windows.tumbling(ms=100))
        self.sent: list[FromWorker] = []
        self.snapshots = Snapshotter(self.cfg, "j", 0, KEYS, self.state, self.sent.append, {}, "r1")

    def flush(self) -> None:
        """What the worker's loop does at a flush: hand over a generation, if the writer is
        idle (else the changes wait in memory)."""
        if self.snapshots.idle:
            self.snapshots.writer.submit([self.rt.snapshot(barrier=False)])

    def barrier(self, n: int) -> None:
        self.snapshots.begin(n, {})
        self.snapshots.take(n, lambda: [self.rt.snapshot()], {}, 0)

    def reply(self, n: int, deadline_s: float = 30.0) -> FromWorker:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for m in self.sent:
                if isinstance(m, CheckpointAck | CheckpointDecline) and m.checkpoint == n:
                    return m
            time.sleep(0.01)
        raise AssertionError(f"no reply for checkpoint {n}: {self.sent}")

    def checkpointed(self, ack: FromWorker, target: Path) -> dict[str, list[Any]]:
        """The window state checkpoint ``ack`` holds, restored into ``target``."""
        assert isinstance(ack, CheckpointAck)
        self.snapshots.storage.materialize(ack.checkpoint, 0, ack.snapshot.files, target)
        restored = RocksState(target)
        try:
            rt = _runtime(restored, windows.tumbling(ms=100))
            return _stored(rt, rt.op.state_id)
        finally:
            restored.close()

    def close(self) -> None:
        self.state.gate.set()
        self.snapshots.join(30)
        self.snapshots.close(30)
        self.state.close()


@pytest.fixture
def harness(tmp_path: Path) -> Any:
    h = Harness(tmp_path)
    yield h
    h.close()


def test_records_after_the_barrier_are_not_in_its_checkpoint(
    harness: Harness, tmp_path: Path
) -> None:
    """A flush's generation is being written when the barrier comes: the barrier's generation
    queues behind it, the records after the barrier stay in memory (the writer is busy), and
    the checkpoint holds exactly what came before the barrier."""
    h = harness
    _feed(h.rt, "a", "b")
    h.state.gate.clear()
    h.flush()  # written by the writer, which waits at the gate
    assert h.state.waiting.wait(10)
    _feed(h.rt, "a")  # before the barrier, not yet handed over
    t0 = time.perf_counter()
    h.barrier(1)
    assert time.perf_counter() - t0 < 1.0  # the barrier never waits for the writer
    _feed(h.rt, "a", "c")  # after the barrier
    h.flush()
    assert not h.snapshots.idle
    h.state.gate.set()
    reply = h.reply(1)
    assert h.checkpointed(reply, tmp_path / "restored") == {"a": [2, 10], "b": [1, 5]}
    assert h.snapshots.writer.wait_idle(10)
    h.flush()  # the loop's next flush: the writer is idle again
    assert h.snapshots.writer.wait_idle(10)
    assert _stored(h.rt, h.rt.op.state_id) == {"a": [3, 15], "b": [1, 5], "c": [1, 5]}


def test_a_barrier_while_the_previous_checkpoint_is_written_is_declined_and_loses_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    _feed(h.rt, "a")
    h.state.gate.clear()
    h.barrier(1)
    assert h.state.waiting.wait(10)
    _feed(h.rt, "b")
    h.barrier(2)  # checkpoint 1 is still being written
    reply2 = h.reply(2, 5)
    assert isinstance(reply2, CheckpointDecline)
    assert "still running" in reply2.reason
    h.state.gate.set()
    assert h.checkpointed(h.reply(1), tmp_path / "restored") == {"a": [1, 5]}
    h.snapshots.join(10)
    h.barrier(3)  # b, changed before the declined barrier, goes into the next checkpoint
    assert h.checkpointed(h.reply(3), tmp_path / "restored-3") == {"a": [1, 5], "b": [1, 5]}


def test_a_failed_checkpoint_still_writes_the_state_it_froze(harness: Harness) -> None:
    h = harness
    _feed(h.rt, "a")
    h.state.fail_checkpoint = "no space left on device"
    h.barrier(1)
    reply = h.reply(1)
    assert isinstance(reply, CheckpointDecline)
    assert "no space left" in reply.reason
    assert h.snapshots.writer.wait_idle(10)
    assert _stored(h.rt, h.rt.op.state_id) == {"a": [1, 5]}
    h.snapshots.check()  # the worker goes on: only this checkpoint failed


def test_state_the_writer_cannot_write_fails_the_worker(harness: Harness) -> None:
    h = harness
    _feed(h.rt, "a")
    h.state.fail_commit = "I/O error"
    h.barrier(1)
    reply = h.reply(1)
    assert isinstance(reply, CheckpointDecline)
    assert h.snapshots.writer.wait_idle(10)
    with pytest.raises(WorkerFailed, match="worker 0 failed: state write failed: I/O error"):
        h.snapshots.check()


def test_a_barrier_while_an_upload_runs_is_declined_naming_the_storage_it_waits_on(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage that does not answer holds an upload for as long as its client retries: the
    checkpoints declined meanwhile say where the upload goes (it said only "still running",
    which was all /health showed through an S3 outage's first seconds)."""
    h = harness
    release = threading.Event()
    upload = h.snapshots.storage.upload

    def stuck(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30)
        return upload(*args, **kwargs)

    monkeypatch.setattr(h.snapshots.storage, "upload", stuck)
    _feed(h.rt, "a")
    h.barrier(1)
    wait_until(lambda: h.snapshots._upload is not None, 10, what="the upload to start")
    h.barrier(2)
    reply2 = h.reply(2, 5)
    assert isinstance(reply2, CheckpointDecline)
    assert f"upload to {h.snapshots.storage.where} is still running (" in reply2.reason
    release.set()
    assert isinstance(h.reply(1), CheckpointAck)
