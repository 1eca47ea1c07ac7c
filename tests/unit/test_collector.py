"""The worker loop's collector settings: what was alive before the loop is left out of later
passes, young passes are rarer, cycles are still collected on their own, and the process's
settings come back when the loop ends."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from pathlib import Path

import pytest

from weir.engine.runtime import gctuning as collector
from weir.engine.runtime.task import main


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_objects_alive_before_the_loop_are_frozen_and_the_thresholds_raised() -> None:
    before = gc.get_threshold()
    with collector.tuned():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (collector.YOUNG, collector.MIDDLE, collector.OLD)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_in_the_loop_are_still_collected_without_an_explicit_call() -> None:
    assert gc.isenabled()
    with collector.tuned():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        dead = weakref.ref(a)
        del a, b
        assert dead() is not None  # a cycle: reference counts cannot free it
        # enough new containers for a young pass, which the raised threshold still runs
        keep = [[] for _ in range(collector.YOUNG + 1)]
        assert dead() is None
        del keep


def test_the_worker_entry_point_runs_the_loop_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_worker`` (local workers and cluster tasks alike) runs the loop inside ``tuned``:
    after the job is loaded and the worker built (its state restored), before its loop."""
    seen: list[tuple[int, int, int]] = []

    class FakeWorker:
        def __init__(self, *args: object) -> None:
            seen.append(gc.get_threshold())

        def run(self) -> None:
            seen.append(gc.get_threshold())

    monkeypatch.setattr(main, "load_configured_job", lambda cfg: None)
    monkeypatch.setattr(main, "Worker", FakeWorker)
    before = gc.get_threshold()
    assert main.run_worker(None, None, 0, None, None, threading.Event())  # type: ignore[arg-type]
    assert seen == [before, (collector.YOUNG, collector.MIDDLE, collector.OLD)]
    assert gc.get_threshold() == before


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_freezes_what_lives_so_young_passes_skip_it() -> None:
    with collector.tuned():
        state = [[i] for i in range(1000)]  # a window's accumulators
        assert collector.settle(time.monotonic()) == 0.0  # no full pass due yet
        frozen = gc.get_freeze_count()
        assert frozen >= len(state)
        gc.collect(0)
        gc.collect(1)
        # left out of young and middle passes: a pass that unfroze would take the state's
        # thousand lists; another thread's frees (a frame it drops) may take a few
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
        del state


def test_a_cycle_frozen_while_alive_is_collected_by_the_next_full_pass() -> None:
    with collector.tuned(full_every_s=3600.0):
        dead = _cycle()
        collector.settle(time.monotonic())  # frozen while it is still garbage-to-be
        gc.collect(0)
        gc.collect(1)
        assert dead() is not None  # frozen: no young or middle pass sees it
        assert collector.full_passes() == 0
        collector.settle(time.monotonic() + 3600.0)  # a full pass is due
        assert collector.full_passes() == 1
        assert dead() is None
        assert gc.get_freeze_count() > 0  # and what lives is frozen again


def test_full_passes_take_at_most_their_share_of_the_time() -> None:
    clock = iter([0.0, 5.0])  # a full pass that takes 5 s
    with collector.tuned(full_every_s=60.0):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(time, "perf_counter", lambda: next(clock))
            # one reading of the clock: on a loaded host seconds may pass between two
            now = time.monotonic() + 60.0
            assert collector.settle(now) == 5.0
        schedule = collector._active
        assert schedule is not None
        # the next one waits 5 / FULL_SHARE seconds, not 60
        assert schedule.next_full == pytest.approx(now + 5.0 / collector.FULL_SHARE)


def test_settle_outside_the_loop_does_nothing() -> None:
    frozen = gc.get_freeze_count()
    assert collector.settle(time.monotonic() + 1e9) == 0.0
    assert gc.get_freeze_count() == frozen
    assert collector.full_passes() == 0


def test_the_worker_loop_settles_at_its_flushes(tmp_path: Path) -> None:
    """A real worker run in-process (the bench's harness) freezes what its windows hold at its
    flushes, and runs a full pass when one is due."""
    from benchmarks import bench
    from tests.support.workloads import write_ads

    data = tmp_path / "events.jsonl"
    write_ads(data, 20_000, 1_000, step_ms=1.0)
    job = tmp_path / "job.py"
    job.write_text(bench.JOB.format(path=str(data), window=bench.TUMBLING))
    calls: list[float] = []
    seen: list[tuple[int, int]] = []  # (full passes so far, objects frozen) after each
    real = collector.settle

    def counted(now: float) -> float:
        calls.append(now)
        took = real(now)
        seen.append((collector.full_passes(), gc.get_freeze_count()))
        return took

    with pytest.MonkeyPatch.context() as m:
        m.setattr(collector, "settle", counted)
        m.setattr(collector, "FULL_EVERY_S", 0.0)  # a full pass at every flush
        worker = bench.finished_worker(job, tmp_path / "state")
    assert worker.sources.records_in == 20_000
    assert calls, "the loop never settled the collector"
    assert calls == sorted(calls)
    assert seen[0][0] == 1  # the first flush found a full pass due
    assert all(frozen > 0 for _, frozen in seen)
    assert collector.full_passes() == 0  # the block has ended
