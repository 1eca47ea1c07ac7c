"""A worker's RocksDB writes its write-ahead log only once someone reads its live state
(decision 0024).

weir never recovers from RocksDB's WAL: a worker that fails restarts from the last completed
checkpoint, as Flink's RocksDB backend does (which never writes one). The WAL is there for the
readers of live state: a secondary instance (``SecondaryReader``) sees a worker's newest
writes by replaying the WAL into its memtables; without one it sees what was flushed. Writing
it costs a worker about 6% of its CPU at 1M keys (its CRC-32C, the appends), and many runs are
never read live (a job run with ``--no-api``, a bounded job to its end, a backfill).

The protocol, through two files in ``<primary>.readers/`` (private to the user):

- a reader announces itself by creating ``attached`` when it first opens, that is when it is
  first read (never when it is made: an API that is built and never reads, such as a second
  ``weir run`` refused on the state directory's lock, must not change a running job's files);
  ``attached`` is never removed;
- the worker opens its primary with the WAL on when ``attached`` exists; otherwise with it off,
  and a thread of its own looks for ``attached`` every ``POLL_S``. When it appears, the worker
  turns the WAL on and flushes its memtables (under its write lock: no write falls between the
  two), so whatever it wrote unlogged is in SST files a secondary reads, and everything after
  is in the WAL; then it creates ``logging``;
- a reader opens or catches up only once ``logging`` exists (it waits up to ``ACK_WAIT_S``).

Once on, the WAL stays on for the primary's life. A job manager's restart removes the workers'
directories, ``<primary>.readers/`` with them: the reader finds ``logging`` gone at its next
catch-up, announces itself again and waits for the new worker's answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weir.base.files import private_dir

log = logging.getLogger(__name__)

ATTACHED = "attached"  # a reader follows this primary
LOGGING = "logging"  # the primary writes its WAL, and flushed what it wrote before
POLL_S = 0.05  # how often a primary without its WAL looks for a reader
ACK_WAIT_S = 5.0  # how long a reader waits for the primary to answer


def readers_dir(primary: Path) -> Path:
    """Where the readers of ``primary`` and the primary meet: ``<primary>.readers``."""
    return primary.with_name(primary.name + ".readers")


def announce(primary: Path) -> None:
    """Tell ``primary``'s worker that a reader follows it (idempotent); nothing while the
    worker's directory does not exist (a job manager removing it must not find it again).

    Raises:
        OSError: the directory cannot be created (the caller says why it reads stale state).
    """
    if primary.parent.is_dir():  # not while the worker's directory is not made yet, or removed
        _mark(primary, ATTACHED)


def _mark(primary: Path, name: str) -> None:
    (private_dir(readers_dir(primary)) / name).touch(mode=0o600, exist_ok=True)


def wanted(primary: Path) -> bool:
    """Has a reader announced itself to ``primary``?"""
    return (readers_dir(primary) / ATTACHED).exists()


def acknowledge(primary: Path) -> None:
    """The primary's answer: it writes its WAL, and what it wrote before is flushed."""
    _mark(primary, LOGGING)


def acknowledged(primary: Path) -> bool:
    """Does ``primary`` write its WAL (every write a secondary has not read is in it)?"""
    return (readers_dir(primary) / LOGGING).exists()


def await_logging(primary: Path, timeout_s: float | None = None) -> bool:
    """Announce a reader to ``primary`` and wait until it logs; False after ``timeout_s``
    (``ACK_WAIT_S``)."""
    deadline = time.monotonic() + (ACK_WAIT_S if timeout_s is None else timeout_s)
    while not acknowledged(primary):
        announce(primary)  # again: a job manager's restart may have removed the directory
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


class Gate:
    """The primary's side: its write options' WAL on or off by ``mode`` ("always", "never",
    "when_read": on once a reader announced itself), ``lock`` held around every write."""

    def __init__(self, primary: Path, mode: str, write_opts: Any, lock: threading.Lock) -> None:
        self.primary = primary
        self._opts = write_opts
        self._lock = lock
        self._closed = threading.Event()
        self._mode = mode
        self._set(mode == "always" or (mode == "when_read" and wanted(primary)))

    @property
    def logging(self) -> bool:
        """Does the primary write its WAL now?"""
        return not self._opts.disable_wal

    def _set(self, on: bool) -> None:
        self._opts.disable_wal = not on

    def start(self, flush: Callable[[], None]) -> None:
        """Answer the readers: at once when the WAL is on, or "never" (they read what was
        flushed, at each checkpoint); or, "when_read", from a thread of its own once one
        announces itself, after turning the WAL on and ``flush``."""
        if self.logging or self._mode == "never":
            acknowledge(self.primary)
            return
        # an answer left by an earlier primary of these files (one closed, or "never") is not
        # this one's: a reader waits for this one
        (readers_dir(self.primary) / LOGGING).unlink(missing_ok=True)
        if self._mode == "when_read":
            threading.Thread(
                target=self._await_reader, args=(flush,), name="weir-wal-gate", daemon=True
            ).start()

    def _await_reader(self, flush: Callable[[], None]) -> None:
        failures = 0
        while not self._closed.wait(POLL_S):
            try:
                if not wanted(self.primary):
                    continue
                with self._lock:
                    if self._closed.is_set():
                        return
                    self._set(True)
                    flush()  # what was written unlogged, to where a secondary reads it
                acknowledge(self.primary)
                return
            except Exception as exc:  # noqa: BLE001 - the reader waits and says so; the job goes on
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG  # tried every POLL_S
                log.log(
                    level, "state at %s cannot start its WAL for a reader: %s", self.primary, exc
                )

    def close(self) -> None:
        """Stop looking for readers (the primary is closing)."""
        self._closed.set()

    def closed(self) -> None:
        """The primary closed: RocksDB flushed what it wrote unlogged, and it writes no more,
        so a reader (``weir api`` of a stopped job) reads it all without a WAL."""
        try:
            acknowledge(self.primary)
        except OSError as exc:
            log.warning("state at %s cannot tell readers it is closed: %s", self.primary, exc)


__all__ = [
    "Gate",
    "ACK_WAIT_S",
    "POLL_S",
    "acknowledge",
    "acknowledged",
    "announce",
    "await_logging",
    "readers_dir",
    "wanted",
]
