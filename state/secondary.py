"""The API's reader of a worker's RocksDB: a secondary instance that follows the primary.

``SecondaryReader`` opens the worker's files as a RocksDB secondary instance and catches up
with the primary in a thread of its own while it is read (a few ms each), so serving queries
never runs on a worker's event loop; ``state.rocksdb`` holds the primary (``RocksState``) and
the iterators both read with.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from rocksdict import AccessType, BlockBasedOptions, Cache, Options, Rdict

from weir.base.errors import StateError
from weir.base.files import private_dir
from weir.state import walgate
from weir.state.rocksdb import BoundedIter, _scan
from weir.state.rocksopts import memory_of

log = logging.getLogger(__name__)

CATCH_UP_MS = 20.0  # how often a secondary reader follows its worker while it is read
SECONDARY_CACHE_MB = 2  # the OS page cache holds the files; this saves decoding hot blocks
# a reader nobody has read for FOLLOW_IDLE_S follows its worker every IDLE_CATCH_UP_S instead of
# every catch-up interval, and after FOLLOW_STOP_S stops (no CPU while no one asks); the next
# read then catches up itself. Following slowly keeps the next read cheap: each flush deletes the
# WAL the reader replayed, and the reopen that follows replays the worker's current WAL, which
# right after the flush is small but by the next read can hold a whole checkpoint interval's
# writes (60 ms under the GIL, measured, for 2.6 MB: the first read after a dashboard's pause)
FOLLOW_IDLE_S = 1.0
IDLE_CATCH_UP_S = 0.25
FOLLOW_STOP_S = 30.0


class SecondaryReader:
    """A read-only view of a worker's RocksDB that follows the primary.

    Opened lazily (the worker creates the primary). While it is read, a thread of its own calls
    ``try_catch_up_with_primary`` every ``catch_up_ms``, so a catch-up (usually well under a
    millisecond, at times a hundred) never runs on a request's path; it holds the GIL while it
    runs (rocksdict does not release it), so the requests wait for what it costs. Unread for a
    second, the thread follows four times a second, and after ``FOLLOW_STOP_S`` it stops. A read
    that finds the last catch-up started more than ``stale_ms`` (twice the interval) ago, because
    the reader was idle or its thread is starved, catches up itself first: an answer is never
    older than that. ``catch_up_ms=0`` has no thread, and every read catches up. Reads are
    thread-safe and take no lock once the instance is open and fresh.

    RocksDB's secondary keeps the entries it replayed from a WAL in its memtable, and reads look
    there first: once the primary flushes newer values of those keys and deletes that WAL, the
    secondary goes on answering the old ones until new writes arrive, for ever on a finished job
    (facebook/rocksdb#15051, fixed upstream after the RocksDB that rocksdict 0.3.29 bundles).
    So each catch-up first lists the primary's WAL files, and when one it may have replayed is
    gone, it reopens instead (a few ms, once per flush at most). The instance it replaces is
    closed at the next reopen, not at once: a request may still be reading it.

    A catch-up is skipped when nothing was written since the last one: the newest WAL, the
    MANIFEST and CURRENT have the size and time they had then (a write appends to the WAL or
    the MANIFEST, a flush makes a new WAL). A worker writes once per flush interval (50 ms) and
    the reader looks every 20 ms, so most looks find nothing; each catch-up took the GIL from
    the requests being served several times (3-5% of the lookups a second). A skipped look
    still counts as a catch-up as of when it started: the state then is what the last one
    replayed.
    """

    def __init__(self, primary: Path, secondary: Path, catch_up_ms: float = CATCH_UP_MS) -> None:
        self.primary = primary
        self.secondary = secondary
        self._catch_up_s = catch_up_ms / 1000.0
        self._db: Rdict | None = None
        self._dir: Path | None = None
        self._retired: tuple[Rdict, Path] | None = None
        self._opened = 0
        self._wals: frozenset[str] = frozenset()  # the primary's WAL files before the last catch-up
        self._seen: tuple[Any, ...] | None = None  # what ``_look`` found before the last one
        self.skipped = 0  # catch-ups skipped: nothing was written since the last
        self._last = 0.0  # monotonic start of the last catch-up (or open)
        self._due = 0.0  # ``expire``: the next read needs a catch-up that started after this
        self._last_read = 0.0
        self._follow_stop: threading.Event | None = None  # set: the follower thread ends
        self._follower: threading.Thread | None = None
        self.caught_up_at = 0.0  # wall time the last catch-up started: answers are this fresh
        self.reopened = 0  # reopens because a replayed WAL was flushed away
        self.catch_up_failures = 0  # catch-ups that failed: caught_up_at did not move
        self._failed_at = 0.0  # the last failure (a run of failures is logged once)
        self._lock = threading.Lock()
        # one bounded block cache for every instance this reader opens: a reopen keeps the warm
        # blocks (cache keys name the SST file, not the instance) and memory stays bounded
        self._cache = Cache(SECONDARY_CACHE_MB * 1024 * 1024)

    def _wal_files(self) -> frozenset[str]:
        return self._look()[0]

    def _look(self) -> tuple[frozenset[str], tuple[Any, ...] | None]:
        """The primary's WAL files, and what says whether anything was written: the newest
        WAL's, every MANIFEST's and CURRENT's size and modification time (None: unknown, catch
        up)."""
        try:
            names = os.listdir(self.primary)
        except OSError:
            return frozenset(), None
        wals = frozenset(e for e in names if e.endswith(".log"))
        watched = [e for e in names if e.startswith("MANIFEST-") or e == "CURRENT"]
        try:
            if wals:
                watched.append(max(wals, key=_file_number))
            stats = [os.stat(self.primary / e) for e in sorted(watched)]
        except (OSError, ValueError):  # one went meanwhile, or a name that is not RocksDB's
            return wals, None
        return wals, (wals, *((st.st_size, st.st_mtime_ns) for st in stats))

    def _open(self) -> Rdict:
        if self._db is not None:
            return self._db
        if not (self.primary / "CURRENT").exists():
            raise StateError(f"state at {self.primary} is not created yet; the worker is starting")
        if not walgate.await_logging(self.primary):
            raise StateError(
                f"the worker of {self.primary} has not started its write-ahead log for readers "
                f"in {walgate.ACK_WAIT_S:g} s; its newest state cannot be read yet"
            )
        if self._opened == 0:
            shutil.rmtree(self.secondary, ignore_errors=True)
        self._opened += 1
        where = self.secondary / f"s{self._opened}"
        shutil.rmtree(where, ignore_errors=True)
        private_dir(where)
        wals = self._wal_files()  # listed before: one created meanwhile is caught next time
        opts = Options(raw_mode=True)
        opts.set_max_open_files(-1)
        # the threads RocksDB makes and joins to load a version's tables, at every catch-up:
        # its default, 16, cost ~0.4 ms a catch-up, under the GIL
        opts.set_max_file_opening_threads(1)
        table = BlockBasedOptions()
        table.set_block_cache(self._cache)
        # index and filter blocks in that cache too, not on the heap of each instance: an
        # instance opens every table (max_open_files=-1), and a reopen briefly keeps two
        table.set_cache_index_and_filter_blocks(True)
        opts.set_block_based_table_factory(table)
        started, wall = time.monotonic(), time.time()
        try:
            self._db = Rdict(str(self.primary), opts, access_type=AccessType.secondary(str(where)))
        except Exception as exc:
            raise StateError(f"cannot open {self.primary} as a secondary: {exc}") from exc
        self._dir, self._wals, self._seen = where, wals, None
        self._last, self.caught_up_at = started, wall
        return self._db

    def _fresh(self) -> Rdict:
        now = self._last_read = time.monotonic()
        last = self._last  # before the instance: _open sets the instance, then _last
        db = self._db
        if db is None or now - last >= 2 * self._catch_up_s or last < self._due:
            with self._lock:
                db = self._open()
                if time.monotonic() - self._last >= 2 * self._catch_up_s or self._last < self._due:
                    db = self._catch_up()
        if self._follow_stop is None and self._catch_up_s > 0:
            self._start_following()
        return db

    def _catch_up(self) -> Rdict:
        """One catch-up, under the lock, of the open instance (or a reopen); returns the
        instance to read."""
        db = self._open()
        # before the look: whatever was written before this, the look finds
        started, wall = time.monotonic(), time.time()
        wals, seen = self._look()
        # a WAL it may have replayed was flushed and deleted, or a new worker writes unlogged
        if self._wals - wals or not walgate.acknowledged(self.primary):
            self._retire()
            self.reopened += 1
            return self._open()
        if seen is not None and seen == self._seen:  # nothing written since the last
            self.skipped += 1
            self._last, self.caught_up_at = started, wall
            return db
        try:
            db.try_catch_up_with_primary()
        except Exception as exc:  # answers stay as of the last catch-up, and say so
            self.catch_up_failures += 1
            if self.catch_up_failures == 1 or self.caught_up_at > self._failed_at:
                log.warning("secondary catch-up failed path=%s error=%s", self.primary, exc)
            self._failed_at = time.time()
            return db
        # once it is done: a read meanwhile answers as of the catch-up before, so it must not
        # count this one as its own (one that takes 100 ms would make it that much older)
        self._last = started
        self._wals, self._seen = wals, seen
        self.caught_up_at = wall
        return db

    def _start_following(self) -> None:
        with self._lock:
            if self._follow_stop is not None or self._db is None:
                return
            stop = self._follow_stop = threading.Event()
        name = f"weir-follow-{self.primary.name}"
        follower = threading.Thread(target=self._follow, args=(stop,), name=name, daemon=True)
        self._follower = follower
        follower.start()

    def _follow(self, stop: threading.Event) -> None:
        """Catches up every interval (every ``IDLE_CATCH_UP_S`` once nobody has read for
        ``FOLLOW_IDLE_S``) until ``stop`` (close) or until nobody has read for
        ``FOLLOW_STOP_S``."""
        while True:
            idle = time.monotonic() - self._last_read > FOLLOW_IDLE_S
            if stop.wait(max(self._catch_up_s, IDLE_CATCH_UP_S) if idle else self._catch_up_s):
                return
            with self._lock:
                if stop.is_set():
                    return
                if self._db is None or time.monotonic() - self._last_read > FOLLOW_STOP_S:
                    self._follow_stop = None
                    return
                try:
                    self._catch_up()
                except Exception as exc:  # noqa: BLE001 - a reopen failed (StateError, OSError)
                    # the next read reopens or says so, and starts a thread again
                    log.warning("secondary reopen failed path=%s error=%r", self.primary, exc)
                    self._follow_stop = None
                    return

    def _retire(self) -> None:
        if self._retired is not None:
            _close_secondary(*self._retired)
        if self._db is not None and self._dir is not None:
            self._retired = (self._db, self._dir)
        self._db = self._dir = None

    def expire(self) -> None:
        """The next read catches up first, with a catch-up that starts after this call: the
        caller knows of a write it must see at once (a live backfill this API loaded), where
        the freshness bound would allow an answer up to twice the interval older."""
        self._due = time.monotonic()

    def get(self, key: bytes) -> bytes | None:
        value = self._fresh().get(key)
        return value if value is None else bytes(value)

    def scan(self, lo: bytes, hi: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        db = self._fresh()
        out: list[tuple[bytes, bytes]] = []
        for item in _scan(db, lo, hi):
            out.append(item)
            if limit is not None and len(out) >= limit:
                break
        return out

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
        """``scan`` of each ``[lo, hi)`` of ``ranges``, on one fresh instance."""
        db = self._fresh()
        return [list(_scan(db, lo, hi)) for lo, hi in ranges]

    def memory(self) -> dict[str, int]:
        """What the open instance holds in memory (``memory_of``: the WAL it replayed into
        memtables, its share of the block cache); 0s when none is open."""
        return memory_of(self._db)

    def iterator(self, hi: bytes) -> BoundedIter:
        """An iterator over keys below ``hi``, for a caller that seeks (the API's key listing
        examines a bounded number of positions, wherever they are)."""
        return BoundedIter(self._fresh(), hi)

    def close(self) -> None:
        """Closes the instances and stops the thread; a later read opens it all again (a
        restarted job's reader is reused)."""
        with self._lock:
            if self._follow_stop is not None:
                self._follow_stop.set()
                self._follow_stop = None
            self._retire()
            if self._retired is not None:
                _close_secondary(*self._retired)
                self._retired = None
            follower, self._follower = self._follower, None
        # its wait ends at once: closed means no thread of it is left (it held frames a caller
        # may count, and it would look once more at files a caller may be removing)
        if follower is not None and follower is not threading.current_thread():
            follower.join(5.0)


def _file_number(name: str) -> int:
    """The number of a RocksDB file (``000123.log``): names outgrow their zero padding."""
    return int(name.split(".", 1)[0])


def _close_secondary(db: Rdict, where: Path) -> None:
    db.close()
    shutil.rmtree(where, ignore_errors=True)
