"""The state writer's rest after a write: RocksDB's write holds the GIL, so the worker's loop
hands over its next flush only once the writer has rested ``REST`` times its last write's CPU
time (``StateWriter.rested``). A heavy write makes the next flush wait; a light one does not."""

from __future__ import annotations

import time
from collections.abc import Mapping

from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.task.statewriter import REST, StateWriter
from weir.state.memory import MemoryState


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


def _written(writer: StateWriter, puts: dict[bytes, bytes]) -> float:
    """Hand one generation over, wait until it is written; the monotonic time it was."""
    writer.submit([StateDelta(puts=puts)])
    assert writer.wait_idle(10.0), "the writer did not finish a one-entry generation in 10 s"
    return time.monotonic()


def test_a_heavy_write_makes_the_next_flush_wait_rest_times_its_cpu() -> None:
    state = SlowState(cpu_s=0.2)
    writer = StateWriter(0, state)
    try:
        assert writer.rested(time.monotonic()), "a writer that wrote nothing is rested"
        done = _written(writer, {b"k": b"v"})
        assert state.get(b"k") == b"v"
        # idle (nothing queued), yet not rested: it wrote 0.2 s of CPU a moment ago
        assert writer.idle
        assert not writer.rested(done)
        assert not writer.rested(done + REST * 0.2 * 0.5)
        assert writer.rested(done + REST * 0.2 + 0.05)
    finally:
        writer.close(5.0)


def test_a_light_write_leaves_the_flush_interval_in_charge() -> None:
    writer = StateWriter(0, SlowState(cpu_s=0.0))
    try:
        done = _written(writer, {b"k": b"v"})
        # a one-entry write costs microseconds: rested within a millisecond of it
        assert writer.rested(done + 0.001)
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
