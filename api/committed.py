"""Committed reads: state as of the latest complete checkpoint, which never rolls back.

The checkpoint's files are linked into a private directory and opened read-only, one RocksDB
instance per worker of the checkpoint (its parallelism may differ from the running job's); a key
is read from the instance whose key-group range holds it. The view is replaced when a newer
checkpoint completes, without a request waiting for it (``CommittedReader``). From remote storage
(S3) the files are downloaded in the background, each SST file once (``sst-cache``: a newer
checkpoint downloads only the files it adds).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from weir.base.errors import StateError
from weir.state.checkpoints import CheckpointStorage, FileRef, prune_cache
from weir.state.rocksdb import BoundedIter, _scan

log = logging.getLogger(__name__)


class CommittedView:
    """Read-only instances of one checkpoint's workers."""

    def __init__(self, storage: CheckpointStorage, n: int, workdir: Path) -> None:
        self.id = n
        meta = storage.metadata(n)
        self.watermark: int = int(meta.get("watermark", 0))
        self.time: int = int(meta.get("time", 0))
        self._dbs: list[tuple[int, int, Rdict]] = []
        self._dir = workdir / f"chk-{n}"
        self.shared: set[str] = set()  # SST files it links from the cache
        shutil.rmtree(self._dir, ignore_errors=True)
        opts = Options(raw_mode=True)
        cache = workdir / "sst-cache" if storage.store.remote else None
        try:
            for w in meta["workers"]:
                target = self._dir / f"w{w['index']}"
                files = [FileRef.from_json(f) for f in w["files"]]
                self.shared.update(f.shared for f in files if f.shared is not None)
                storage.materialize(n, int(w["index"]), files, target, cache)
                db = Rdict(str(target), opts, access_type=AccessType.read_only())
                lo, hi = w["key_groups"]
                self._dbs.append((int(lo), int(hi), db))
        except Exception as exc:
            self.close()
            raise StateError(f"cannot open checkpoint {n} for committed reads: {exc}") from exc

    def scan(self, key_group: int, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        for first, last, db in self._dbs:
            if first <= key_group <= last:
                return list(_scan(db, lo, hi))
        return []

    def iterator(self, key_group: int, hi: bytes) -> BoundedIter:
        """An iterator below ``hi`` over the instance that holds ``key_group`` (for seeks)."""
        for first, last, db in self._dbs:
            if first <= key_group <= last:
                return BoundedIter(db, hi)
        raise StateError(f"checkpoint {self.id} holds no key group {key_group}")

    def close(self) -> None:
        for _, _, db in self._dbs:
            db.close()
        self._dbs = []
        shutil.rmtree(self._dir, ignore_errors=True)


Opener = Callable[[CheckpointStorage, int, Path], CommittedView]


class CommittedReader:
    """The committed view of a job's newest checkpoint, opened on first use and replaced when
    a newer checkpoint completes.

    A replacement is opened in a thread of its own while the previous view goes on answering
    (opening links a checkpoint's files and opens RocksDB: too slow for a request to wait on,
    and never on the event loop). With storage on a file system, the first view is opened by a
    request, which the routes run in a worker thread. With remote storage even the first is
    opened in the background (a download): until it is there, reads answer 503 with
    ``Retry-After``. ``opener`` makes a view (``CommittedView``; tests slow it down).
    """

    def __init__(
        self, storage: CheckpointStorage, workdir: Path, opener: Opener = CommittedView
    ) -> None:
        self.storage = storage
        self.workdir = workdir
        self.opener = opener
        self._view: CommittedView | None = None
        self._retired: CommittedView | None = None  # a request may still be reading it
        self._opening: int | None = None  # the checkpoint a thread is opening
        self._closed = False
        self._lock = threading.Lock()
        self._first = threading.Lock()  # one request opens the first view; the others wait

    def view(self, latest: int | None) -> CommittedView | None:
        if latest is None:
            return None
        with self._lock:
            current = self._view
            if current is not None:
                if current.id != latest and self._opening is None:
                    self._opening = latest
                    threading.Thread(
                        target=self._replace, args=(latest,), name="weir-committed", daemon=True
                    ).start()
                return current
            if self.storage.store.remote:
                if self._opening is None:
                    self._opening = latest
                    threading.Thread(
                        target=self._replace, args=(latest,), name="weir-committed", daemon=True
                    ).start()
                raise StateError(
                    f"the committed view (checkpoint {self._opening}) is still being downloaded "
                    f"from {self.storage.where}"
                )
        with self._first:
            if self._view is None:
                fresh = self.opener(self.storage, latest, self.workdir)
                with self._lock:
                    self._view = fresh
            return self._view

    def time_of(self, n: int) -> int | None:
        """The trigger time of checkpoint ``n``, when it is the current or the retired view."""
        for view in (self._view, self._retired):
            if view is not None and view.id == n:
                return view.time
        return None

    def _replace(self, n: int) -> None:
        try:
            fresh = self.opener(self.storage, n, self.workdir)
        except Exception as exc:  # the previous view goes on answering
            log.warning("committed view not replaced checkpoint=%d error=%s", n, exc)
            with self._lock:
                self._opening = None
            return
        with self._lock:
            self._opening = None
            if self._closed:
                fresh.close()
                return
            # the swap first: a view that fails to close must not keep the reader on it (each
            # request would open the new checkpoint again, and leak it)
            done, self._retired, self._view = self._retired, self._view, fresh
            if done is not None:
                _close(done)
            if self.storage.store.remote:
                keep = fresh.shared | (self._retired.shared if self._retired else set())
                try:
                    prune_cache(self.workdir / "sst-cache", keep)
                except OSError as exc:  # the cache keeps some files until the next swap
                    log.warning("committed view cache not pruned error=%s", exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for view in (self._view, self._retired):
                if view is not None:
                    _close(view)
            self._view = self._retired = None


def _close(view: CommittedView) -> None:
    """Close ``view``; a failure is logged, not raised (its files may stay until the process
    ends: nothing reads them any more)."""
    try:
        view.close()
    except Exception as exc:  # RocksDB's own error, or OSError removing its files
        log.warning("committed view not closed checkpoint=%d error=%s", view.id, exc)


__all__ = ["CommittedReader", "CommittedView"]
