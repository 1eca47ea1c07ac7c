"""Committed reads: state as of the latest complete checkpoint, which never rolls back.

The checkpoint's files are linked into a private directory and opened read-only, one RocksDB
instance per worker of the checkpoint (its parallelism may differ from the running job's); a key
is read from the instance whose key-group range holds it. The view is replaced when a newer
checkpoint completes.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from weir.engine.errors import StateError
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.rocksdb import _scan


class CommittedView:
    """Read-only instances of one checkpoint's workers."""

    def __init__(self, storage: CheckpointStorage, n: int, workdir: Path) -> None:
        self.id = n
        meta = storage.metadata(n)
        self.watermark: int = int(meta.get("watermark", 0))
        self.time: int = int(meta.get("time", 0))
        self._dbs: list[tuple[int, int, Rdict]] = []
        self._dir = workdir / f"chk-{n}"
        shutil.rmtree(self._dir, ignore_errors=True)
        opts = Options(raw_mode=True)
        try:
            for w in meta["workers"]:
                target = self._dir / f"w{w['index']}"
                storage.materialize(
                    n, int(w["index"]), [FileRef.from_json(f) for f in w["files"]], target
                )
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

    def close(self) -> None:
        for _, _, db in self._dbs:
            db.close()
        self._dbs = []
        shutil.rmtree(self._dir, ignore_errors=True)


class CommittedReader:
    """The committed view of a job's newest checkpoint, opened on first use and reopened when
    a newer checkpoint completes."""

    def __init__(self, storage: CheckpointStorage, workdir: Path) -> None:
        self.storage = storage
        self.workdir = workdir
        self._view: CommittedView | None = None
        self._retired: CommittedView | None = None  # a request may still be reading it
        self._lock = threading.Lock()

    def view(self, latest: int | None) -> CommittedView | None:
        if latest is None:
            return None
        with self._lock:
            if self._view is None or self._view.id != latest:
                fresh = CommittedView(self.storage, latest, self.workdir)
                if self._retired is not None:
                    self._retired.close()
                self._retired, self._view = self._view, fresh
            return self._view

    def close(self) -> None:
        with self._lock:
            for view in (self._view, self._retired):
                if view is not None:
                    view.close()
            self._view = self._retired = None


__all__ = ["CommittedReader", "CommittedView"]
