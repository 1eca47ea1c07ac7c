"""Checkpoint storage (DESIGN.md, "Checkpoints"): incremental RocksDB snapshots on a file system.

Layout under ``<checkpoint-dir>/<job>/``:

- ``shared/<name>.sst``: SST files, uploaded once and referenced by every checkpoint that holds
  them (an SST file never changes, so a file live in two checkpoints is stored once);
- ``chk-<n>/w<i>/``: the small per-worker files of checkpoint ``n`` (MANIFEST, CURRENT, OPTIONS);
- ``chk-<n>/_metadata``: JSON written last, through a rename: a checkpoint without it does not
  exist. It lists every file with its size and CRC-32, the key-group ranges, source offsets and
  watermarks. Savepoints are checkpoints marked ``"savepoint": true``, never deleted.

A worker takes a RocksDB checkpoint (hard links, after a flush) while its loop waits, then a
background thread uploads the SST files new since the last *completed* checkpoint: the
synchronous part is the hard-linking, the copying is asynchronous.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.engine.errors import PathRefused, StateError
from weir.engine.paths import plain_name
from weir.state.files import fsync_dir, open_private, private_dir, write_private

log = logging.getLogger(__name__)

METADATA = "_metadata"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file of a worker's RocksDB checkpoint: its local name, where it is stored (``shared``
    names a file under ``shared/``; otherwise it is private to the checkpoint), size and CRC."""

    name: str
    size: int
    crc32: int
    shared: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "size": self.size, "crc32": self.crc32}
        if self.shared is not None:
            out["shared"] = self.shared
        return out

    @staticmethod
    def from_json(raw: dict[str, Any]) -> FileRef:
        """Names from a ``_metadata`` file are plain file names (``PathRefused`` otherwise), so
        a crafted checkpoint cannot make a restore read or write outside its directories."""
        shared = raw.get("shared")
        return FileRef(
            plain_name(str(raw["name"]), "checkpoint file name"),
            int(raw["size"]),
            int(raw["crc32"]),
            None if shared is None else plain_name(str(shared), "shared checkpoint file name"),
        )


def copy_with_crc(src: Path, dst: Path) -> tuple[int, int]:
    """Copy ``src`` to ``dst`` (through a temporary name, created ``0600`` and synced) and
    return ``(size, crc32)``. The new name is durable once ``dst``'s directory is synced."""
    tmp = dst.with_name(dst.name + ".tmp")
    crc = 0
    size = 0
    with open(src, "rb") as fin, os.fdopen(open_private(tmp), "wb") as fout:
        while chunk := fin.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            fout.write(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)
    return size, crc


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


class CheckpointStorage:
    """One job's checkpoints under ``<root>/<job>``."""

    def __init__(self, root: Path, job: str) -> None:
        self.root = root
        self.job = job
        self.base = root / job
        self.shared = self.base / "shared"
        self._warned: set[int] = set()  # unreadable checkpoints retention has reported

    def chk_dir(self, n: int) -> Path:
        return self.base / f"chk-{n}"

    def worker_dir(self, n: int, worker: int) -> Path:
        return self.chk_dir(n) / f"w{worker}"

    def ensure(self) -> None:
        """Create the job's storage, private to the user (``0700``)."""
        try:
            private_dir(self.base, own=True)
            private_dir(self.shared)
        except OSError as exc:
            raise StateError(
                f"cannot create checkpoint storage {self.base}: {exc.strerror}; pass a writable "
                "--checkpoint-dir"
            ) from exc

    # -- writing ---------------------------------------------------------------------------------

    def upload(
        self,
        local: Path,
        n: int,
        worker: int,
        name_prefix: str,
        known: dict[str, FileRef],
    ) -> tuple[list[FileRef], int]:
        """Store the RocksDB checkpoint directory ``local`` as worker ``worker``'s part of
        checkpoint ``n``. SST files already in ``known`` (uploaded by a completed checkpoint) are
        referenced, not copied. Returns the file list and the bytes copied."""
        files: list[FileRef] = []
        copied = 0
        wdir = private_dir(self.worker_dir(n, worker))
        new_shared = False
        for entry in sorted(os.listdir(local)):
            src = local / entry
            if entry.endswith(".sst"):
                ref = known.get(entry)
                if ref is None or not (self.shared / (ref.shared or "")).exists():
                    shared = f"{name_prefix}-{entry}"
                    size, crc = copy_with_crc(src, self.shared / shared)
                    ref = FileRef(entry, size, crc, shared)
                    copied += size
                    new_shared = True
                files.append(ref)
            elif entry.endswith(".log"):
                continue  # the checkpoint flushed the memtable: the WAL holds nothing needed
            else:
                size, crc = copy_with_crc(src, wdir / entry)
                copied += size
                files.append(FileRef(entry, size, crc))
        # each file's data is synced as it is copied; their names only with their directory
        if new_shared:
            fsync_dir(self.shared)
        fsync_dir(wdir)
        return files, copied

    def write_metadata(self, n: int, meta: dict[str, Any]) -> None:
        """Make checkpoint ``n`` exist: ``_metadata`` is written to a temporary name, synced,
        renamed into place, and the rename synced (the ``chk-<n>`` directory, then the job's,
        which holds ``chk-<n>``'s own name). The files it lists were synced when uploaded, so
        after a crash a checkpoint either exists whole or does not exist."""
        chk = private_dir(self.chk_dir(n))
        write_private(chk / METADATA, json.dumps(meta, indent=1).encode(), durable=True)
        fsync_dir(self.base)

    # -- reading ---------------------------------------------------------------------------------

    def ids(self) -> list[int]:
        """Ids of checkpoint directories that have a ``_metadata`` file, oldest first."""
        if not self.base.is_dir():
            return []
        found = []
        for d in self.base.iterdir():
            if d.name.startswith("chk-") and d.name[4:].isdigit() and (d / METADATA).exists():
                found.append(int(d.name[4:]))
        return sorted(found)

    def next_id(self) -> int:
        """The id after every checkpoint directory (complete or not) ever made here."""
        if not self.base.is_dir():
            return 1
        nums = [
            int(d.name[4:])
            for d in self.base.iterdir()
            if d.name.startswith("chk-") and d.name[4:].isdigit()
        ]
        return max(nums, default=0) + 1

    def metadata(self, n: int) -> dict[str, Any]:
        path = self.chk_dir(n) / METADATA
        try:
            meta: dict[str, Any] = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise StateError(
                f"checkpoint {path.parent} has an unreadable _metadata: {exc}"
            ) from exc
        return meta

    def summaries(self) -> list[dict[str, Any]]:
        """Summaries of the complete checkpoints, newest first (no file is read but metadata)."""
        out = []
        for n in reversed(self.ids()):
            try:
                meta = self.metadata(n)
            except StateError as exc:
                log.warning("%s", exc)
                continue
            out.append({k: v for k, v in meta.items() if k not in ("workers", "sources")})
        return out

    def problem(self, n: int, verify_checksums: bool = True) -> str | None:
        """Why checkpoint ``n`` cannot be restored (None when it can): metadata unreadable, a
        file name that is not a plain name, a file that is a symlink out of the job's storage,
        missing, of the wrong size, or with the wrong checksum."""
        try:
            meta = self.metadata(n)
        except StateError as exc:
            return str(exc)
        base = self.base.resolve()
        for w in meta.get("workers", []):
            for raw in w.get("files", []):
                try:
                    ref = FileRef.from_json(raw)
                except PathRefused as exc:
                    return str(exc)
                path = self.path_of(n, int(w["index"]), ref)
                if not path.exists():
                    return f"file {path} is missing"
                if not path.resolve().is_relative_to(base):
                    return f"file {path} is a symlink to {path.resolve()}, outside {base}"
                if path.stat().st_size != ref.size:
                    return f"file {path} has {path.stat().st_size} bytes, expected {ref.size}"
                if verify_checksums and file_crc(path) != ref.crc32:
                    return f"file {path} fails its CRC-32 check"
        return None

    def path_of(self, n: int, worker: int, ref: FileRef) -> Path:
        if ref.shared is not None:
            return self.shared / ref.shared
        return self.worker_dir(n, worker) / ref.name

    def latest_valid(self) -> int | None:
        """The newest checkpoint that can be restored; broken ones are skipped with a log line."""
        for n in reversed(self.ids()):
            problem = self.problem(n)
            if problem is None:
                return n
            log.error("checkpoint chk-%d of job %s is skipped: %s", n, self.job, problem)
        return None

    # -- restoring -------------------------------------------------------------------------------

    def materialize(self, n: int, worker: int, files: Iterable[FileRef], target: Path) -> None:
        """Rebuild worker ``worker``'s RocksDB directory of checkpoint ``n`` at ``target``: SST
        files are hard-linked from storage when it is on the same file system (they never
        change), copied otherwise."""
        shutil.rmtree(target, ignore_errors=True)
        private_dir(target)
        for ref in files:
            src = self.path_of(n, worker, ref)
            dst = target / ref.name
            if ref.shared is not None:
                try:
                    os.link(src, dst)
                    continue
                except OSError:
                    pass
            shutil.copyfile(src, dst)

    # -- retention -------------------------------------------------------------------------------

    def retain(self, keep: int) -> list[int]:
        """Delete complete checkpoints beyond the newest ``keep``, incomplete ones older than
        the newest complete one, and shared files no remaining checkpoint references. Returns
        the deleted ids. Call it only while no checkpoint is in flight.

        Never deleted: savepoints, and a checkpoint whose ``_metadata`` cannot be read or
        parsed. Since nobody can tell which shared files such a checkpoint needs, every shared
        file stays while it exists; a warning names it, so that its owner repairs or removes
        it."""
        ids = self.ids()
        metas: dict[int, dict[str, Any]] = {}
        unreadable: list[int] = []
        for n in ids:
            try:
                metas[n] = self._parsed(n)
            except StateError as exc:
                unreadable.append(n)
                self._warn_unreadable(n, exc)
        regular = [n for n in ids if n in metas and metas[n].get("savepoint") is not True]
        doomed = set(regular[:-keep] if keep > 0 else regular)
        newest = ids[-1] if ids else 0
        present = set(ids)
        for d in self.base.iterdir() if self.base.is_dir() else []:
            if d.name.startswith("chk-") and d.name[4:].isdigit():
                n = int(d.name[4:])
                if n not in present and n < newest:
                    doomed.add(n)  # an aborted checkpoint: it never had a _metadata
        for n in sorted(doomed):
            shutil.rmtree(self.chk_dir(n), ignore_errors=True)
            metas.pop(n, None)
        if not unreadable:
            self._delete_unreferenced(metas.values())
        return sorted(doomed)

    def _parsed(self, n: int) -> dict[str, Any]:
        """``_metadata`` of ``n`` with every file list retention relies on well-formed."""
        meta = self.metadata(n)
        try:
            if not isinstance(meta, dict):
                raise TypeError("not a JSON object")
            for w in meta.get("workers", []):
                for raw in w.get("files", []):
                    shared = raw.get("shared")
                    if shared is not None and not isinstance(shared, str):
                        raise TypeError(f"shared file name {shared!r} is not a string")
        except (AttributeError, TypeError) as exc:
            raise StateError(
                f"checkpoint {self.chk_dir(n)} has a malformed _metadata: {exc}"
            ) from exc
        return meta

    def _warn_unreadable(self, n: int, exc: StateError) -> None:
        if n in self._warned:
            return
        self._warned.add(n)
        log.warning(
            "job=%s checkpoint=%d is kept, with every shared file, because retention cannot "
            "read it: %s; repair or remove %s",
            self.job,
            n,
            exc,
            self.chk_dir(n),
        )

    def _delete_unreferenced(self, metas: Iterable[dict[str, Any]]) -> None:
        used = {
            raw["shared"]
            for meta in metas
            for w in meta.get("workers", [])
            for raw in w.get("files", [])
            if raw.get("shared")
        }
        if self.shared.is_dir():
            for f in self.shared.iterdir():
                if f.name not in used:
                    f.unlink(missing_ok=True)


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["METADATA", "CheckpointStorage", "FileRef", "copy_with_crc", "file_crc", "now_ms"]
