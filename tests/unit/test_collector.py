"""The worker loop's collector settings: what was alive before the loop is left out of later
passes, young passes are rarer, cycles are still collected on their own, and the process's
settings come back when the loop ends."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from weir.engine.runtime import collector
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
    assert main.run_worker(None, 0, None, None, threading.Event())  # type: ignore[arg-type]
    assert seen == [before, (collector.YOUNG, collector.MIDDLE, collector.OLD)]
    assert gc.get_threshold() == before
