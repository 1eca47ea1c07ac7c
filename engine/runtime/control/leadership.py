"""One job manager per job: the lease in checkpoint storage (``state/lease.py``), acquired,
renewed and given up (DESIGN.md, "Job-manager failover").

``Leadership.acquire`` waits as a standby until the lease is free: never written, released by a
job manager that stopped in order, held by one that is provably gone (``holder_gone``), or not
renewed for ``lease_ms`` as timed on this host's monotonic clock from the moment this process
first saw that version of it. It then writes the record for the next epoch with a conditional
write, so of several contenders one wins.

The holder replaces the record every ``lease_ms / 4`` (``renew``) and on every checkpoint it
commits (``commit``). It counts itself leader until ``VALID`` of ``lease_ms`` after the start
of its last successful write: a contender waits at least ``lease_ms`` after that write began,
so the holder stops committing before anyone else may begin, with a fifth of the lease to spare
for its clock running slow and for killing its workers. A write that finds the record changed
by someone else, or a lease it cannot renew in time (storage out of reach), is the end:
``lost`` says why, the renewal thread calls ``on_lost``, and the job manager kills its workers
and exits (``LeaseLost``).

A job manager that dies holds its lease until it expires, unless the next one can tell it is
gone (``holder_gone``): the same node (kernel boot and pid namespace) and its pid is not alive,
or the same state directory (host, path and the run lock's inode) whose run lock this process
now holds. Either way its workers must be gone too before anything is touched: each local
worker holds a shared ``flock`` on ``<state-dir>/<job>/workers.lock`` for its life
(``task.main``), and the job manager waits until nobody holds it (``jobmanager``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from weir.base.errors import LeaseLost, StorageConflict, StorageError
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.lease import Holder, LeaderRecord, LeaseStore, Lineage, newest_epoch

log = logging.getLogger(__name__)

VALID = 0.8  # of lease_ms after a successful write began: how long the holder counts as leader
RENEW = 0.25  # of lease_ms: how often the holder renews
RETRY_S = 1.0  # a failed renewal or read is tried again this soon
# the watchdog wakes this long after the lease's end by this host's clock (which a renewal moves
# on), or at most this long after its last look
WATCH_LATE_S = 0.001
WATCH_MAX_S = 1.0


class Leadership:
    """This job manager's lease on its job."""

    def __init__(
        self,
        storage: CheckpointStorage,
        holder: Holder,
        lease_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = LeaseStore(storage)
        self.holder = holder
        self.lease_ms = lease_ms
        self._clock = clock
        self.record: LeaderRecord | None = None  # ours, as last written
        self._version: str | None = None
        self._valid_until = float("-inf")
        self._lock = threading.Lock()  # one write at a time: renewals, commits, release
        self.lost: str | None = None  # why the lease is no longer ours
        self._stop = threading.Event()
        self._news = threading.Event()  # lost or released: the watchdog looks at once
        self._threads: list[threading.Thread] = []
        self._last_error: str | None = None  # the last renewal's storage error

    @property
    def epoch(self) -> int:
        return 0 if self.record is None else self.record.epoch

    @property
    def lineage(self) -> Lineage:
        return Lineage() if self.record is None else self.record.lineage

    def valid(self) -> bool:
        """The lease is ours and, by this host's clock, no one else may have taken it."""
        return self.lost is None and self._clock() < self._valid_until

    # -- acquiring -------------------------------------------------------------------------------

    def acquire(
        self, stopping: threading.Event, holder_gone: Callable[[Holder], bool]
    ) -> LeaderRecord | None:
        """Wait until the lease is this job manager's; returns the record it took over (None:
        the lease was never written). Returns None at once, holding nothing, once
        ``stopping`` is set (``self.record`` stays None)."""
        seen: tuple[str, float] | None = None  # a held record's version, first seen when
        waiting_said = False
        while not stopping.is_set():
            try:
                found = self.leases.read()
            except StorageError as exc:
                log.warning("job=%s standby: %s; trying again", self._job, exc)
                stopping.wait(RETRY_S)
                continue
            if found is None:
                if self._tried(stopping, self._create):
                    return None
                continue
            record, version = found
            free = record.released or holder_gone(record.holder)
            if not free:
                now = self._clock()
                if seen is None or seen[0] != version:
                    seen = (version, now)
                    if not waiting_said:
                        _say_standby(self._job, record, self.leases.where)
                        waiting_said = True
                    stopping.wait(min(RETRY_S, record.lease_ms / 10_000))
                    continue
                if now - seen[1] < record.lease_ms / 1000:
                    stopping.wait(min(RETRY_S, record.lease_ms / 10_000))
                    continue
                log.warning(
                    "job=%s the lease of run=%s host=%s epoch=%d was not renewed for %d ms; "
                    "taking it over",
                    self._job, record.holder.run, record.holder.host, record.epoch,
                    record.lease_ms,
                )  # fmt: skip
            taken = self._tried(stopping, partial(self._take_over, record, version))
            if taken:
                return record
            if taken is not None:
                seen = None  # someone else wrote meanwhile: look again
            # storage failed: the record, if unchanged, is as expired as it was; try again
        return None

    def _tried(self, stopping: threading.Event, write: Callable[[], bool]) -> bool | None:
        """A standby's write of the lease: its result, or None when storage failed, which is a
        warning and a retry, never the end of the standby. If the write landed though its
        answer was lost, the record names this job manager, whose state directory and run lock
        ``holder_gone`` recognises: the next look takes it over at once, with the next
        epoch."""
        try:
            return write()
        except StorageError as exc:
            log.warning("job=%s standby: cannot write the lease: %s; trying again", self._job, exc)
            stopping.wait(RETRY_S)
            return None

    @property
    def _job(self) -> str:
        return self.leases.storage.job

    def _create(self) -> bool:
        start = self._clock()
        mine = LeaderRecord(
            self._job,
            newest_epoch(self.leases.storage) + 1,
            self.holder,
            self.lease_ms,
            time_ms=now_ms(),
        )
        try:
            version = self.leases.create(mine)
        except StorageConflict:
            return False  # another job manager wrote it first
        self._took(mine, version, start)
        return True

    def _take_over(self, old: LeaderRecord, version: str) -> bool:
        start = self._clock()
        mine = LeaderRecord(
            self._job, old.epoch + 1, self.holder, self.lease_ms,
            lineage=old.lineage, time_ms=now_ms(),
        )  # fmt: skip
        try:
            new_version = self.leases.replace(mine, version)
        except StorageConflict:
            return False
        self._took(mine, new_version, start, old)
        return True

    def _took(
        self, record: LeaderRecord, version: str, start: float, old: LeaderRecord | None = None
    ) -> None:
        self.record, self._version = record, version
        self._valid_until = start + self.lease_ms * VALID / 1000
        # a take-over from a holder that did not release is news; an ordinary start is not
        # (a start that fails at once says one line, its error)
        level = logging.INFO if old is not None and not old.released else logging.DEBUG
        log.log(
            level, "job=%s leader epoch=%d lease=%s lease_ms=%d",
            self._job, record.epoch, self.leases.where, self.lease_ms,
        )  # fmt: skip

    # -- holding ---------------------------------------------------------------------------------

    def _write(
        self, change: Callable[[LeaderRecord], LeaderRecord], wait_s: float = -1
    ) -> LeaderRecord:
        """Replace our record with ``change(record)``. ``LeaseLost`` when the lease is not ours
        (any more); ``StorageError`` when storage did not answer (the lease may still be).
        ``wait_s``: at most this long for a write in flight (``StorageError`` then)."""
        if not self._lock.acquire(timeout=wait_s):
            raise StorageError(f"a write of the lease {self.leases.where} is still in flight")
        try:
            for _ in range(2):
                if self.lost is not None:
                    raise LeaseLost(self.lost)
                if not self.valid():
                    self._lose(self._expired())
                    raise LeaseLost(str(self.lost))
                assert self.record is not None and self._version is not None
                start = self._clock()
                new = replace(
                    change(self.record), renewal=self.record.renewal + 1, time_ms=now_ms()
                )
                try:
                    version = self.leases.replace(new, self._version)
                except StorageConflict:
                    self._adopt_own_write()
                    continue  # our own earlier write was there: apply the change to it
                self.record, self._version = new, version
                self._valid_until = start + self.lease_ms * VALID / 1000
                return new
            raise StorageError(f"the lease {self.leases.where} keeps changing under its holder")
        finally:
            self._lock.release()

    def _adopt_own_write(self) -> None:
        """The record changed under us. Ours if it names this run and epoch (a write whose
        answer was lost, then retried or timed out): take it as the current one. Anyone
        else's: the lease is lost."""
        found = self.leases.read()
        if found is not None:
            record, version = found
            if record.epoch == self.epoch and record.holder.run == self.holder.run:
                self.record, self._version = record, version
                return
        theirs = found[0].holder if found is not None else None
        who = f"run {theirs.run} on {theirs.host}" if theirs is not None else "someone"
        self._lose(f"{who} took over its lease at {self.leases.where}")
        raise LeaseLost(str(self.lost))

    def _expired(self) -> str:
        """Why a lease that ran out was lost: the same words whichever thread noticed first
        (the watchdog, or a commit that found it expired)."""
        if self._last_error is None:  # no renewal failed: this process stalled (a pause, swap)
            return f"its lease expired ({self.lease_ms} ms without a renewal)"
        return f"it could not be renewed within {self.lease_ms} ms: {self._last_error}"

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = f"job {self._job!r}: this job manager lost its lease: {why}"
            log.error("%s; it commits nothing more and stops", self.lost)
            self._news.set()

    def commit(self, n: int) -> None:
        """Checkpoint ``n`` (its ``_metadata`` written) joins the lineage: committed."""
        self._write(lambda r: replace(r, lineage=r.lineage.committed(n)))

    def begin(self, lineage: Lineage) -> None:
        """This run's state begins as ``lineage`` says (a restore, a fresh start)."""
        self._write(lambda r: replace(r, lineage=lineage))

    def serving_at(self, url: str | None) -> None:
        """Publish where this job manager's API serves (best effort)."""
        self.holder = replace(self.holder, api=url)
        try:
            self._write(lambda r: replace(r, holder=self.holder), wait_s=10.0)
        except (LeaseLost, StorageError) as exc:
            log.warning("job=%s could not publish its API address in the lease: %s", self._job, exc)

    def start_renewing(self, on_lost: Callable[[str], None]) -> None:
        """Renew in a thread of its own until ``release``, and watch the lease from another
        that never waits on storage: once the lease is lost or has run out (a renewal stuck in
        a storage call does not hold it up), ``on_lost`` is called once, with why."""

        def renew() -> None:
            failing = False
            while not self._stop.wait(RETRY_S if failing else self.lease_ms * RENEW / 1000):
                try:
                    self._write(lambda r: r)
                    failing = False
                except LeaseLost:
                    return  # the watchdog tells
                except Exception as exc:  # noqa: BLE001 - StorageError, or what a store let through
                    if not failing:  # retried: a renewal thread that died would lose the lease
                        why = str(exc) if isinstance(exc, StorageError) else repr(exc)
                        log.warning("job=%s cannot renew its lease: %s", self._job, why)
                    failing = True
                    self._last_error = str(exc)

        def watch() -> None:
            # wakes when the lease runs out by this host's clock (each renewal moves that on),
            # when a thread finds it lost, or at release: not on a clock of its own
            while True:
                self._news.clear()
                if self._stop.is_set():
                    return
                if not self.valid():
                    self._lose(self._expired())
                    on_lost(str(self.lost))
                    return
                left = self._valid_until - self._clock()
                self._news.wait(min(WATCH_MAX_S, max(0.0, left) + WATCH_LATE_S))

        self._threads = [
            threading.Thread(target=renew, name="weir-lease", daemon=True),
            threading.Thread(target=watch, name="weir-lease-watch", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def release(self) -> None:
        """Stop renewing and, if still ours, mark the lease released: the next job manager
        takes over at once."""
        self._stop.set()
        self._news.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(5.0)
        if self.record is None or self.lost is not None:
            return
        try:
            self._write(lambda r: replace(r, released=True), wait_s=10.0)
        except (LeaseLost, StorageError) as exc:
            log.warning(
                "job=%s could not release its lease (it expires instead): %s", self._job, exc
            )
            return
        self.lost = "released"
        log.debug("job=%s released its lease epoch=%d", self._job, self.epoch)


def _say_standby(job: str, record: LeaderRecord, where: str) -> None:
    h = record.holder
    log.warning(
        "job=%s standby: the lease %s is held by run=%s host=%s pid=%d epoch=%d; waiting for "
        "it to be released or to expire (%d ms without a renewal)",
        job, where, h.run, h.host, h.pid, record.epoch, record.lease_ms,
    )  # fmt: skip


# -- who holds it ------------------------------------------------------------------------------


def this_node() -> str:
    """This kernel's boot id and this process's pid namespace: two processes with the same
    node see each other's pids ("" when /proc does not say)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pidns}"


def holder_of(run_id: str, state_dir: Path, lock_file: Path) -> Holder:
    """This job manager as its lease names it (``lock_file``: its run lock, held)."""
    st = lock_file.stat()
    return Holder(
        run=run_id,
        host=socket.gethostname(),
        node=this_node(),
        pid=os.getpid(),
        state_dir=str(state_dir.resolve()),
        lock=f"{st.st_dev}:{st.st_ino}",
    )


def gone(me: Holder, other: Holder) -> bool:
    """``other`` is provably not running: on this node with a pid that is not alive, or with
    this very state directory, whose run lock ``me`` holds."""
    if other.node and other.node == me.node and not _alive(other.pid):
        return True
    return (other.host, other.state_dir, other.lock) == (me.host, me.state_dir, me.lock)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = [
    "Leadership",
    "gone",
    "holder_of",
    "this_node",
]
