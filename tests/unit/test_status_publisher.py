"""``control.status.StatusPublisher``, the thread that keeps ``jobmanager.json`` current for
``weir api`` processes: it writes every ``PERIOD_S``; a poke after a watched field changed
(the job's state, say) writes at once, and a poke with nothing changed writes nothing. It
wakes for those, not on a clock of its own (it looked every 50 ms before, in the API's
process)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.runtimes import plain_status
from weir.engine.runtime.control import status
from weir.engine.runtime.control.status import StatusPublisher, read_status
from weir.engine.runtime.view import JobStatus

BASE = plain_status("j", state="starting")


class Snapshots:
    def __init__(self) -> None:
        self.current = BASE
        self.taken = 0

    def __call__(self) -> JobStatus:
        self.taken += 1
        return self.current


def test_a_poke_after_a_change_publishes_at_once_and_one_without_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status, "PERIOD_S", 30.0)  # no periodic write within the test
    path = tmp_path / "jobmanager.json"
    snap = Snapshots()
    publisher = StatusPublisher(path, snap)
    publisher.start()
    try:
        written = path.stat().st_mtime_ns
        first = read_status(path)
        assert first is not None and first.state == "starting"
        taken = snap.taken
        time.sleep(0.3)  # what the thread does unpoked in 0.3 s: nothing (it looked 6 times)
        assert snap.taken == taken
        publisher.poke()  # nothing changed: no write
        wait_until(lambda: snap.taken > taken, 5.0, what="the poke's look")
        assert path.stat().st_mtime_ns == written
        snap.current = replace(BASE, state="running")
        publisher.poke()
        wait_until(
            lambda: (s := read_status(path)) is not None and s.state == "running",
            5.0,
            what="the new state in the file",
        )
    finally:
        publisher.stop("stopped")
    final = read_status(path)
    assert final is not None and final.state == "stopped"


def test_the_period_writes_without_a_poke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status, "PERIOD_S", 0.05)
    path = tmp_path / "jobmanager.json"
    snap = Snapshots()
    publisher = StatusPublisher(path, snap)
    publisher.start()
    try:
        taken = snap.taken
        wait_until(lambda: snap.taken >= taken + 3, 5.0, what="three periodic writes")
    finally:
        publisher.stop("stopped")
