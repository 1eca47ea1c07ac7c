"""The lease's rules on a local checkpoint directory, with clocks the test moves: a standby
takes over only after it saw the same version for ``lease_ms`` on its own clock (or at once
when the lease was released or its holder is gone); the epoch grows at every change of holder;
a holder counts itself leader only until ``VALID`` of the lease after its last write, and one
whose lease was taken loses it on its next write, committing nothing."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from weir.base.errors import LeaseLost, StorageError
from weir.engine.runtime.control import leadership
from weir.engine.runtime.control.leadership import VALID, Leadership
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import Holder, LeaseStore

LEASE_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _holder(run: str) -> Holder:
    return Holder(run, "host", "", 1, f"/state-{run}", "0:0")


def _leader(storage: CheckpointStorage, run: str, clock: Clock) -> Leadership:
    return Leadership(storage, _holder(run), LEASE_MS, clock)


class Stepping(threading.Event):
    """A ``stopping`` event whose waits move the standby's clock instead of sleeping, and that
    gives up after ``limit`` waits."""

    def __init__(self, clock: Clock, limit: int = 10_000) -> None:
        super().__init__()
        self.clock, self.left, self.waited = clock, limit, 0.0

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        if self.left <= 0:
            self.set()
        step = timeout or 0.0
        self.clock.now += step
        self.waited += step
        return self.is_set()


@pytest.fixture
def storage(tmp_path: Path) -> CheckpointStorage:
    chk = CheckpointStorage(str(tmp_path / "chk"), "j")
    chk.ensure()
    return chk


def test_a_standby_waits_a_full_lease_on_its_own_clock_then_takes_over(
    storage: CheckpointStorage,
) -> None:
    first_clock, second_clock = Clock(), Clock()
    first = _leader(storage, "a", first_clock)
    assert first.acquire(threading.Event(), lambda _h: False) is None  # the first record
    assert first.epoch == 1 and first.valid()
    first.commit(1)

    second = _leader(storage, "b", second_clock)
    stepping = Stepping(second_clock)
    taken = second.acquire(stepping, lambda _h: False)
    assert taken is not None and taken.holder.run == "a"
    assert LEASE_MS / 1000 <= stepping.waited <= LEASE_MS / 1000 + 1.5
    assert second.epoch == 2 and second.lineage.checkpoints == (1,)

    first_clock.now = LEASE_MS * VALID / 1000 - 0.01
    assert first.valid()  # by its own clock it still may: but the record is not its own
    with pytest.raises(LeaseLost, match="took over its lease"):
        first.commit(2)
    assert first.lost is not None and not first.valid()
    record = LeaseStore(storage).read()
    assert record is not None and record[0].lineage.checkpoints == (1,)  # 2 never committed


def test_a_holder_that_did_not_renew_in_time_stops_counting_itself_leader(
    storage: CheckpointStorage,
) -> None:
    clock = Clock()
    leader = _leader(storage, "a", clock)
    leader.acquire(threading.Event(), lambda _h: False)
    clock.now = LEASE_MS * VALID / 1000 + 0.01
    assert not leader.valid()
    with pytest.raises(LeaseLost, match="expired"):
        leader.commit(1)


def test_a_lease_lost_to_failing_storage_says_so_whichever_thread_noticed(
    storage: CheckpointStorage,
) -> None:
    """A commit that finds the lease expired after renewals failed names the storage error,
    in the same words the watchdog uses (seen in CI: the two raced, and said different
    things)."""
    clock = Clock()
    leader = _leader(storage, "a", clock)
    leader.acquire(threading.Event(), lambda _h: False)
    leader._last_error = "cannot reach http://127.0.0.1:1"  # what the renewal thread records
    clock.now = LEASE_MS * VALID / 1000 + 0.01
    with pytest.raises(LeaseLost) as lost:
        leader.commit(1)
    assert f"could not be renewed within {LEASE_MS} ms: cannot reach" in str(lost.value)


def test_a_released_lease_or_a_gone_holder_is_taken_at_once(storage: CheckpointStorage) -> None:
    first = _leader(storage, "a", Clock())
    first.acquire(threading.Event(), lambda _h: False)
    first.release()
    second_clock = Clock()
    second = _leader(storage, "b", second_clock)
    assert second.acquire(Stepping(second_clock), lambda _h: False) is not None
    assert second_clock.now == 0.0 and second.epoch == 2

    third_clock = Clock()
    third = _leader(storage, "c", third_clock)
    assert third.acquire(Stepping(third_clock), lambda h: h.run == "b") is not None
    assert third_clock.now == 0.0 and third.epoch == 3


def test_a_standby_asked_to_stop_holds_nothing(storage: CheckpointStorage) -> None:
    _leader(storage, "a", Clock()).acquire(threading.Event(), lambda _h: False)
    clock = Clock()
    standby = _leader(storage, "b", clock)
    assert standby.acquire(Stepping(clock, limit=3), lambda _h: False) is None
    assert standby.record is None
    found = LeaseStore(storage).read()
    assert found is not None and found[0].holder.run == "a"


def test_a_renewal_that_raises_what_storage_did_not_wrap_is_retried(
    storage: CheckpointStorage, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The renewal thread caught only ``StorageError``; anything else a store let through (an
    ``OSError``) ended it, and the job was stopped a lease later for a lease "not renewed",
    though storage answered again at once. Now it warns and retries like any failed write."""
    monkeypatch.setattr(leadership, "RETRY_S", 0.02)
    leader = Leadership(storage, _holder("a"), 400)  # renewed every 100 ms, on the real clock
    assert leader.acquire(threading.Event(), lambda _h: False) is None
    replace = leader.leases.replace
    failures: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(1)
            raise OSError(5, "Input/output error")
        return replace(*args, **kwargs)

    monkeypatch.setattr(leader.leases, "replace", flaky)
    lost: list[str] = []
    with caplog.at_level(logging.WARNING, logger=leadership.__name__):
        leader.start_renewing(lost.append)
        try:
            wait_until(
                lambda: failures and leader.record is not None and leader.record.renewal >= 4,
                10.0,
                what="renewals to go on after the failed one",
            )
            assert leader.valid() and not lost
        finally:
            leader.release()
    assert "cannot renew its lease: OSError(5, 'Input/output error')" in caplog.text


def test_the_watchdog_wakes_at_the_leases_end_not_on_a_clock(
    storage: CheckpointStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog runs in the API's process: it looked at the lease 20 times a second, each
    time taking the GIL from the requests. Now it sleeps until the lease would run out (each
    renewal moves that on) or a loss: a held lease costs it a few looks a second. Renewals that
    stop (storage stuck) are still noticed as the lease runs out on this host's clock."""
    leader = Leadership(storage, _holder("a"), 600)  # valid 480 ms after a write began
    assert leader.acquire(threading.Event(), lambda _h: False) is None
    looks: list[float] = []
    valid = leader.valid

    def counted() -> bool:
        if threading.current_thread().name == "weir-lease-watch":  # not a renewal's own look
            looks.append(time.monotonic())
        return valid()

    monkeypatch.setattr(leader, "valid", counted)
    stuck, unblock = threading.Event(), threading.Event()
    replace = leader.leases.replace

    def renew(*args: Any, **kwargs: Any) -> Any:
        if stuck.is_set():  # storage that does not answer: the renewal hangs
            unblock.wait(10.0)
            raise OSError(110, "Connection timed out")
        return replace(*args, **kwargs)

    monkeypatch.setattr(leader.leases, "replace", renew)
    lost: list[str] = []
    leader.start_renewing(lost.append)
    try:
        wait_until(lambda: looks, 5.0, what="the watchdog's first look")
        first = looks[0]
        wait_until(  # renewed every 150 ms: six renewals take about 0.9 s
            lambda: leader.record is not None and leader.record.renewal >= 6,
            10.0,
            what="six renewals",
        )
        seen = [t for t in looks if t >= first]
        span = time.monotonic() - first
        assert not lost and len(seen) <= 4 + 3 * span, f"{len(seen)} looks in {span:.2f} s"
        stuck.set()
        since = time.monotonic()
        wait_until(lambda: lost, 5.0, what="the watchdog to notice the lease ran out")
        assert time.monotonic() - since < 1.0  # at the lease's end (480 ms after a renewal)
        assert "its lease expired" in lost[0]
    finally:
        unblock.set()
        leader.release()


def test_a_standby_whose_take_over_write_fails_warns_and_tries_again(
    storage: CheckpointStorage, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """CI: the old leader was stopped (SIGSTOP) inside its compare-and-replace and held the
    directory's lock; the standby's take-over gave up after 10 s with ``StorageError`` and the
    standby exited (``weir: error: cannot lock ...``). A storage error is now a warning and
    another look: the standby takes over once storage lets it."""
    _leader(storage, "a", Clock()).acquire(threading.Event(), lambda _h: False)
    clock = Clock()
    standby = _leader(storage, "b", clock)
    replace = standby.leases.replace
    failures: list[int] = []

    def locked(*args: Any, **kwargs: Any) -> Any:
        if len(failures) < 2:
            failures.append(1)
            raise StorageError("cannot lock .leader.lock: another process held it for 10 s")
        return replace(*args, **kwargs)

    monkeypatch.setattr(standby.leases, "replace", locked)
    stepping = Stepping(clock)
    with caplog.at_level(logging.WARNING, logger=leadership.__name__):
        taken = standby.acquire(stepping, lambda _h: False)
    assert taken is not None and taken.holder.run == "a" and len(failures) == 2
    # tried again a retry later, not after another full lease: the record had not changed
    assert stepping.waited <= LEASE_MS / 1000 + 2 * leadership.RETRY_S + 1.5
    assert standby.epoch == 2 and standby.valid()
    assert "standby: cannot write the lease: cannot lock .leader.lock" in caplog.text
    assert "trying again" in caplog.text
