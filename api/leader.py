"""Which job manager leads a job, as ``weir api`` (and each API member) sees it: the lease in
checkpoint storage (``state/lease.py``), read every ``FOLLOW_S`` by a thread of its own, so no
request waits on storage.

Flink's REST endpoints find the leader through its high-availability services (a leader
retrieval service over ZooKeeper or a ConfigMap); weir's API reads the same record the job
managers fence each other with. The record names the leader's run, host and state directory:
``api.remote.RemoteRuntime`` reads that directory's status and worker state, so when the job
manager fails over to another state directory the API follows it without a restart.

A lease whose version has not changed for its ``lease_ms``, timed on this host's monotonic clock
from when this process first saw that version, is ``expired``: its holder stopped renewing it
(killed, stalled, or cut off from storage) and no job manager has taken over yet. Storage that
does not answer keeps the last record, which expires the same way: the holder cannot renew it
either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from weir.base.errors import StorageError
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import LeaderRecord, LeaseStore

log = logging.getLogger(__name__)

FOLLOW_S = 0.5  # how often the lease is read


@dataclass(frozen=True, slots=True)
class Leader:
    """The lease as last read.

    Attributes:
        record: the record (None: the job never took a lease, or it was not read yet).
        expired: not renewed (nor released) for its ``lease_ms`` as timed here.
        unchanged_s: how long its version has been the same, by this host's clock.
        error: why the last read failed (None: it did not).
    """

    record: LeaderRecord | None = None
    expired: bool = False
    unchanged_s: float = 0.0
    error: str | None = None


class LeaderWatch:
    """Follows one job's lease; ``leader`` is the latest reading.

    Example:
        >>> watch = LeaderWatch(CheckpointStorage("/tmp/chk", "t1"))  # doctest: +SKIP
        >>> watch.start(); watch.leader.record  # doctest: +SKIP
    """

    def __init__(
        self,
        storage: CheckpointStorage,
        period_s: float = FOLLOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = LeaseStore(storage)
        self.period_s = period_s
        self._clock = clock
        self._seen: tuple[str, float] | None = None  # a version and when it was first seen
        self._record: LeaderRecord | None = None
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return self.leases.where

    @property
    def leader(self) -> Leader:
        record, seen = self._record, self._seen
        if record is None or seen is None:
            return Leader(error=self._error)
        unchanged = self._clock() - seen[1]
        expired = not record.released and unchanged >= record.lease_ms / 1000
        return Leader(record, expired, unchanged, self._error)

    def problem(self, published_run: str | None, state_here: bool, status: Path) -> str | None:
        """Why the leader does not vouch for what an API reads (None: it does, or the job
        never took a lease), given the run whose status the API reads (``published_run``),
        whether the leader's state directory is on this host, and that status file."""
        lead = self.leader
        record = lead.record
        if record is None:
            return None
        h = record.holder
        who = f"the job's leader (run {h.run} on {h.host}, epoch {record.epoch})"
        if lead.expired:
            why = f": cannot read it: {lead.error}" if lead.error else ""
            return (
                f"{who} has not renewed its lease {self.where} for {lead.unchanged_s:.1f} s"
                f"{why}; waiting for a job manager to take over"
            )
        if published_run == h.run:
            return None
        if not state_here:
            where = f"its API at {h.api}" if h.api else "the API of weir run on that host"
            return f"{who} keeps its state in {h.state_dir}, which is not on this host; ask {where}"
        return f"waiting for {who} to publish its status in {status}"

    def poll(self) -> None:
        """Read the lease once (the thread calls it; so may a test)."""
        try:
            found = self.leases.read()
        except Exception as exc:  # noqa: BLE001 - StorageError, or what a store let through
            if self._error is None:  # the thread reads again: one that died froze the lease
                why = str(exc) if isinstance(exc, StorageError) else repr(exc)
                log.warning("api: cannot read the job's lease %s: %s", self.where, why)
            self._error = str(exc)
            return
        self._error = None
        if found is None:
            self._record, self._seen = None, None
            return
        record, version = found
        if self._seen is None or self._seen[0] != version:
            if self._record is None or record.holder.run != self._record.holder.run:
                log.info(
                    "api: job=%s leader run=%s host=%s epoch=%d state_dir=%s",
                    record.job, record.holder.run, record.holder.host, record.epoch,
                    record.holder.state_dir,
                )  # fmt: skip
            self._seen = (version, self._clock())
        self._record = record

    def start(self) -> LeaderWatch:
        """Read at once, then every ``period_s`` in a daemon thread until ``close``."""
        self.poll()

        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.poll()

        self._thread = threading.Thread(target=loop, name="weir-leader-watch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)


__all__ = ["FOLLOW_S", "Leader", "LeaderWatch"]
