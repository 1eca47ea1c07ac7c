"""The state writer's rest after a write: RocksDB's write holds the GIL, so the worker's loop
hands over its next flush only once the writer has rested ``REST`` times its last write's CPU
time (``StateWriter.rested``). A heavy write makes the next flush wait; a light one does not."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Mapping

import msgpack
import numpy as np
import pytest

from tests.support import stored_windows
from weir.base.errors import StateError, WorkerFailed
from weir.engine.runtime.messages import OperatorMarks
from weir.engine.runtime.operators.cellwrites import CellLog, CellPart, Frozen
from weir.engine.runtime.operators.delta import ColumnSegment, Segment, StateDelta
from weir.engine.runtime.task.statewriter import MAX_REST_S, REST, StateWriter
from weir.state.backend import Batch
from weir.state.cellcodec import bucket_of_hash
from weir.state.memory import MemoryBatch, MemoryState

SID = 3


class SlowState(MemoryState):
    """A backend whose write burns ``cpu_s`` of this thread's CPU, as RocksDB's does."""

    def __init__(self, cpu_s: float) -> None:
        super().__init__()
        self.cpu_s = cpu_s

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        t0 = time.thread_time()
        while time.thread_time() - t0 < self.cpu_s:
            pass
        super().write(puts, deletes)


def _written(writer: StateWriter, puts: dict[bytes, bytes]) -> tuple[float, float]:
    """Hand one generation over, wait until it is written; the monotonic times just before it
    was handed over and once it was written (the write, and so its rest, began after the
    first: timing-free bounds for "not rested yet")."""
    handed = time.monotonic()
    writer.submit([StateDelta(puts=puts)])
    assert writer.wait_idle(10.0), "the writer did not finish a one-entry generation in 10 s"
    return handed, time.monotonic()


def test_a_heavy_write_makes_the_next_flush_wait_rest_times_its_cpu() -> None:
    cpu_s = MAX_REST_S / REST / 2  # a rest of half the longest
    state = SlowState(cpu_s=cpu_s)
    writer = StateWriter(0, state)
    try:
        assert writer.rested(time.monotonic()), "a writer that wrote nothing is rested"
        handed, done = _written(writer, {b"k": b"v"})
        assert state.get(b"k") == b"v"
        # idle (nothing queued), yet not rested: it wrote cpu_s of CPU, then rests 3x that
        assert writer.idle
        assert not writer.rested(handed + cpu_s)
        assert not writer.rested(handed + cpu_s + REST * cpu_s * 0.9)
        assert writer.rested(done + REST * cpu_s + 0.01)
    finally:
        writer.close(5.0)


def test_the_rest_is_never_longer_than_its_bound() -> None:
    """A barrier copies what waits for the next flush, so the rest is bounded."""
    writer = StateWriter(0, SlowState(cpu_s=MAX_REST_S))  # a rest of 3x the bound uncapped
    try:
        handed, done = _written(writer, {b"k": b"v"})
        assert not writer.rested(handed + MAX_REST_S + MAX_REST_S * 0.9)
        assert writer.rested(done + MAX_REST_S + 0.01)
    finally:
        writer.close(5.0)


def test_a_light_write_leaves_the_flush_interval_in_charge() -> None:
    writer = StateWriter(0, SlowState(cpu_s=0.0))
    try:
        _, done = _written(writer, {b"k": b"v"})
        # a one-entry write costs microseconds: rested within milliseconds of it
        assert writer.rested(done + 0.01)
    finally:
        writer.close(5.0)


def test_a_queued_generation_is_not_rested() -> None:
    state = SlowState(cpu_s=0.3)
    writer = StateWriter(0, state)
    try:
        writer.submit([StateDelta(puts={b"a": b"1"})])
        # being written (or queued): never rested, however late the clock
        assert not writer.rested(time.monotonic() + 3600.0)
        assert writer.wait_idle(10.0)
    finally:
        writer.close(5.0)


class Recording(MemoryState):
    """Keeps each batch's puts as given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[bytes]] = []

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        self.batches.append(list(puts))
        super().write(puts, deletes)


def _mixed_generation() -> StateDelta:
    """Segments over two namespaces, rows (one state key given twice) and encoded puts, none
    of them in state-key order; one row's key is also a segment's and one put's a row's."""
    prefixes = {k: (0, k.encode()) for k in ("d", "b", "a", "c")}
    segments: list[Segment] = [
        (b"|2", ["d", "b", "a"], [4, 40, 2, 20, 1, 10]),
        (b"|1", ["c", "a"], [3, 30, 1, 11]),
    ]
    rows = [("c", b"|2", [7, 70]), ("b", b"|9", [5, 50]), ("c", b"|2", [8, 80])]
    puts = {b"z": b"late", b"b|9": b"put-wins", b"m": b"mid"}
    return StateDelta(dict(puts), list(rows), [], prefixes.__getitem__, list(segments), 2)


def test_chunked_and_whole_writes_hold_the_same_state_and_each_part_is_in_key_order() -> None:
    whole, chunked = Recording(), Recording()
    _mixed_generation().write(whole)
    _mixed_generation().write(chunked, chunk=2)
    entries = dict(whole.scan(b"", b"\xff"))
    assert entries == dict(chunked.scan(b"", b"\xff"))
    # later parts win: the second row of (c, |2), and the encoded put over the row (b, |9)
    assert msgpack.unpackb(entries[b"c|2"]) == [8, 80]
    assert entries[b"b|9"] == b"put-wins"
    assert msgpack.unpackb(entries[b"a|1"]) == [1, 11]
    assert msgpack.unpackb(entries[b"d|2"]) == [4, 40]
    assert len(entries) == 9
    # each segment, the rows and the puts reach RocksDB as ascending runs
    order = [k for batch in chunked.batches for k in batch]
    runs = [order[0:3], order[3:5], order[5:7], order[7:10]]
    assert runs == [
        [b"a|2", b"b|2", b"d|2"],
        [b"a|1", b"c|1"],
        [b"b|9", b"c|2"],
        [b"b|9", b"m", b"z"],
    ]


def test_column_segments_write_as_cells_of_python_values_and_a_late_update_wins() -> None:
    """A columnar operator's changed rows (``ColumnSegment``) are written as cells holding
    the row layout's values: int64 and float64 columns read back as Python ints and floats,
    an object column keeps its values (an int past int64). A window both handed over as
    columns and frozen in the same generation (fired, then updated by an allowed-late
    record) is one entry per cell, in which the frozen (later) slots win and the columns'
    other keys stay."""
    big = (1 << 63) + 5  # past int64, still a msgpack integer
    keys = ["k2938", "k1598", "k3024"]  # one cell: key group 90, bucket 49 of 128 groups
    crcs = [zlib.crc32(k.encode()) for k in keys]
    assert len({(c % 128, bucket_of_hash(c)) for c in crcs}) == 1
    column = ColumnSegment.of(
        end=5,
        keys=keys,
        key_groups=np.array([c % 128 for c in crcs], np.uint16),
        slots=[np.array([2, 1, 3], np.int64), [big, 0.5, 7], np.array([1.5, 2.0, 3.0])],
    )
    late: list[Frozen] = [(SID, 5, ["k2938"], [9, 9, 9.5])]
    for chunk in (None, 1):
        state = MemoryState()
        part = CellPart(CellLog(128), SID, 3, late)
        delta = StateDelta(columns=[column], cells=part)
        assert len(delta) == 4
        delta.write(state, chunk)
        rows = {k.decode(): s for k, _, end, s in stored_windows(state.scan(b"", b"\xff"), SID)}
        assert rows == {"k1598": [1, 0.5, 2.0], "k2938": [9, 9, 9.5], "k3024": [3, 7, 3.0]}
        assert [type(v) for v in rows["k1598"]] == [int, float, float]
    fresh = MemoryState()
    StateDelta(columns=[column], cells=CellPart(CellLog(128), SID, 3, [])).write(fresh)
    rows = {k.decode(): s for k, _, _, s in stored_windows(fresh.scan(b"", b"\xff"), SID)}
    assert rows["k2938"] == [2, big, 1.5]


class Commits(MemoryState):
    """Keeps the bytes (keys and values) of each batch committed."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def commit(self, batch: Batch) -> None:
        assert isinstance(batch, MemoryBatch)
        self.sizes.append(sum(len(k) + len(v or b"") for k, v in batch.ops))
        super().commit(batch)


def test_a_batch_of_cells_ends_at_its_byte_bound_and_the_state_is_the_same() -> None:
    """The worker's batches stay below the size its malloc maps afresh (``WRITE_BYTES``), so
    each batch's buffer reuses the heap's pages; where they end changes no window stored (a
    cell's key names its generation, so two writes' keys differ)."""
    keys = [f"k{i}" for i in range(400)]
    crcs = [zlib.crc32(k.encode()) for k in keys]
    column = ColumnSegment.of(
        end=5,
        keys=keys,
        key_groups=np.array([c % 128 for c in crcs], np.uint16),
        slots=[np.arange(400, dtype=np.int64), np.arange(400, dtype=np.float64)],
    )
    states: dict[str, Commits] = {}
    for name, bound in (("whole", 1 << 62), ("bounded", 600)):
        state = states[name] = Commits()
        StateDelta(columns=[column], cells=CellPart(CellLog(128), SID, 2, [])).write(
            state, 1024, bound
        )
    whole, bounded = states["whole"], states["bounded"]
    assert len(whole.sizes) == 1 and len(bounded.sizes) > 3
    biggest = max(len(k) + len(v) for k, v in whole.scan(b"", b"\xff"))
    assert all(size < 600 + biggest for size in bounded.sizes)
    assert sum(bounded.sizes) == sum(whole.sizes)
    rows = [sorted(stored_windows(s.scan(b"", b"\xff"), SID)) for s in (whole, bounded)]
    assert rows[0] == rows[1] and len(rows[0]) == 400


def test_columns_without_a_cell_writer_are_refused() -> None:
    column = ColumnSegment.of(5, ["a"], np.array([0], np.uint16), [np.array([1], np.int64)])
    with pytest.raises(ValueError, match="CellPart"):
        StateDelta(columns=[column])


class GatedState(MemoryState):
    """A backend whose writes wait for ``go`` (so a test sees the writer mid-write), and fail
    while ``fail`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.fail = False

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        assert self.go.wait(10.0)
        if self.fail:
            raise StateError("disk full")
        super().write(puts, deletes)


def test_the_written_watermarks_move_only_once_their_generation_is_written() -> None:
    """What a live read's freshness bound counts on: ``written`` (the operators' watermarks
    as of what RocksDB holds) never runs ahead of RocksDB, and a failed write moves nothing."""
    state = GatedState()
    writer = StateWriter(0, state)
    try:
        writer.written = {"op": OperatorMarks(100, 100)}
        writer.submit([StateDelta(puts={b"k": b"v"})], marks={"op": OperatorMarks(200, 200)})
        assert not writer.wait_idle(0.05)  # mid-write: RocksDB lacks it, the marks stay
        assert writer.written == {"op": OperatorMarks(100, 100)} and state.get(b"k") is None
        state.go.set()
        assert writer.wait_idle(10.0)
        assert writer.written == {"op": OperatorMarks(200, 200)} and state.get(b"k") == b"v"
        state.fail = True
        writer.submit([StateDelta(puts={b"k": b"w"})], marks={"op": OperatorMarks(300, 300)})
        assert writer.wait_idle(10.0)
        assert writer.written == {"op": OperatorMarks(200, 200)} and writer.failure is not None
    finally:
        state.go.set()
        writer.close(10.0)


class BrokenState(MemoryState):
    """A backend whose write raises what no ``WeirError`` wraps (a bug, a library's own error,
    as rocksdict raised for a batch written twice)."""

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        raise Exception("this batch is already consumed")


def test_an_unexpected_error_in_a_write_fails_the_worker_instead_of_hanging_it() -> None:
    """The writer's thread died on it and left its generation queued: the worker's loop waited
    for it forever (``wait_idle`` at the end of input), with nothing but a thread's traceback
    on stderr. Now the generation is done with, the worker fails (and restarts from its last
    checkpoint), and the next generation is still handled."""
    writer = StateWriter(0, BrokenState())
    errors: list[object] = []
    try:
        writer.submit([StateDelta(puts={b"k": b"v"})], errors.append)
        assert writer.wait_idle(10.0), "the writer's thread died with the generation queued"
        with pytest.raises(WorkerFailed, match="state write failed: Exception: this batch"):
            writer.check()
        assert len(errors) == 1 and isinstance(errors[0], StateError)  # a checkpoint declines
        writer.submit([StateDelta(puts={b"k": b"v"})])
        assert writer.wait_idle(10.0)
    finally:
        writer.close(10.0)


def test_an_error_in_what_runs_after_a_write_fails_the_worker_instead_of_hanging_it() -> None:
    """``then`` (a checkpoint's RocksDB checkpoint) runs on the writer's thread too."""
    writer = StateWriter(0, MemoryState())

    def then(error: object) -> None:
        raise OSError("no space left on device")

    try:
        writer.submit([StateDelta(puts={b"k": b"v"})], then)
        assert writer.wait_idle(10.0), "the writer's thread died with the generation queued"
        with pytest.raises(WorkerFailed, match="after a state write: OSError: no space left"):
            writer.check()
        writer.submit([StateDelta(puts={b"k": b"w"})])
        assert writer.wait_idle(10.0)
    finally:
        writer.close(10.0)
