"""Checkpoint storage (DESIGN.md, "Checkpoints"): incremental RocksDB snapshots in a directory or
an S3 bucket (``state/objectstore.py``).

Layout under ``<checkpoint-dir>/<job>/``:

- ``shared/<name>.sst``: SST files, uploaded once and referenced by every checkpoint that holds
  them (an SST file never changes, so a file live in two checkpoints is stored once);
- ``chk-<n>/w<i>/``: the small per-worker files of checkpoint ``n`` (MANIFEST, CURRENT, OPTIONS);
- ``chk-<n>/_metadata``: JSON written last, with one atomic put: a checkpoint without it does
  not exist. It lists every file with its size and CRC-32, the key-group ranges, source offsets and
  watermarks. Savepoints are checkpoints marked ``"savepoint": true``, never deleted.

A worker takes a RocksDB checkpoint (hard links, after a flush) while its loop waits, then a
background thread uploads the SST files new since the last *completed* checkpoint: the
synchronous part is the hard-linking, the copying is asynchronous. With remote storage a worker
keeps hard links to the SST files it uploaded or downloaded (``cache``), so that a recovery on
the same host downloads only the files it lacks (Flink's local recovery).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.base.errors import PathRefused, StateError, StorageConflict, StorageError
from weir.base.files import private_dir
from weir.base.paths import plain_name
from weir.base.redact import redact_url
from weir.state.objectstore import (
    LocalStore,
    ObjectStore,
    StorageLocation,
    copy_with_crc,
    file_crc,
    open_store,
    storage_location,
)

log = logging.getLogger(__name__)

METADATA = "_metadata"
UPLOADS = 4  # files moved to or from storage at a time, per worker


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


class CheckpointStorage:
    """One job's checkpoints under ``<root>/<job>``, where ``root`` is a directory or
    ``s3://BUCKET/PREFIX`` (``state/objectstore.py``)."""

    def __init__(self, root: str | Path | StorageLocation, job: str) -> None:
        where = root if isinstance(root, StorageLocation) else storage_location(root)
        if where.path is not None:  # one spelling of a directory, wherever the process runs
            where = StorageLocation("file", path=where.path.resolve())
        self.root = where
        self.job = job
        self.store: ObjectStore = open_store(self.root)
        self._warned: set[int] = set()  # unreadable checkpoints retention has reported

    @staticmethod
    def at(location: str | Path) -> tuple[CheckpointStorage, int]:
        """The storage and id of the checkpoint at ``location`` (``…/<job>/chk-<n>``)."""
        where = storage_location(location, "checkpoint")
        name = where.name
        if not (name.startswith("chk-") and name[4:].isdigit()):
            raise StateError(
                f"{where.url} is not a checkpoint: its last part must be chk-<n>; pass "
                "`restore` latest or the path of a chk-<n> directory"
            )
        job = where.parent
        return CheckpointStorage(job.parent, job.name), int(name[4:])

    @property
    def where(self) -> str:
        """The job's storage, as a path or URL: for messages and ``/jobs``."""
        return self.root.child(self.job).url

    @property
    def shown(self) -> str:
        """``where``, and the server of a store with an endpoint of its own (its password
        redacted): for a message about storage that does not answer."""
        endpoint = getattr(self.store, "endpoint", None)
        return f"{self.where} at {redact_url(endpoint)}" if endpoint else self.where

    def location(self, n: int) -> str:
        """Where checkpoint ``n`` is, in the form ``--restore`` takes."""
        return self.root.child(self.job).child(f"chk-{n}").url

    def _chk(self, n: int) -> str:
        return f"{self.job}/chk-{n}"

    def key_of(self, n: int, worker: int, ref: FileRef) -> str:
        if ref.shared is not None:
            return f"{self.job}/shared/{ref.shared}"
        return f"{self._chk(n)}/w{worker}/{ref.name}"

    def ensure(self, probe: bool = True) -> None:
        """Create the job's storage, private to the user (``0700``); on S3 (``probe``), check
        that the bucket answers, so a wrong endpoint, bucket or key fails at the start."""
        if isinstance(self.store, LocalStore):
            base = self.store.path(self.job)
            try:
                private_dir(base, own=True)
                private_dir(base / "shared")
            except OSError as exc:
                raise StorageError(
                    f"cannot create checkpoint storage {base}: {exc.strerror}; pass a writable "
                    "`checkpoint_dir`"
                ) from exc
        elif probe:
            self.store.children(self.job)

    # -- writing ---------------------------------------------------------------------------------

    def upload(
        self,
        local: Path,
        n: int,
        worker: int,
        name_prefix: str,
        known: dict[str, FileRef],
        cache: Path | None = None,
    ) -> tuple[list[FileRef], int]:
        """Store the RocksDB checkpoint directory ``local`` as worker ``worker``'s part of
        checkpoint ``n``, up to ``UPLOADS`` files at a time. SST files in ``known`` (held by a
        completed checkpoint) are referenced, not copied. New SST files are also linked into
        ``cache`` (a worker's local copies, for local recovery). Returns the file list and the
        bytes copied."""
        jobs: list[tuple[str, Path, str | None]] = []  # (local name, source, shared name)
        files: dict[str, FileRef] = {}
        # a known file is referenced only while it is still stored (one listing, not a request
        # per file): a checkpoint never names an object someone removed
        stored = self.store.sizes(f"{self.job}/shared") if known else {}
        for entry in sorted(os.listdir(local)):
            if entry.endswith(".log"):
                continue  # the checkpoint flushed the memtable: the WAL holds nothing needed
            ref = known.get(entry) if entry.endswith(".sst") else None
            if ref is not None and f"{self.job}/shared/{ref.shared}" in stored:
                files[entry] = ref
            else:
                jobs.append(
                    (
                        entry,
                        local / entry,
                        f"{name_prefix}-{entry}" if entry.endswith(".sst") else None,
                    )
                )

        def put(job: tuple[str, Path, str | None]) -> FileRef:
            entry, src, shared = job
            ref = FileRef(entry, 0, 0, shared)
            size, crc = self.store.put_file(self.key_of(n, worker, ref), src)
            if shared is not None and cache is not None:
                _link_into(cache, shared, src)
            return FileRef(entry, size, crc, shared)

        with ThreadPoolExecutor(UPLOADS, thread_name_prefix="weir-put") as pool:
            for ref in pool.map(put, jobs):
                files[ref.name] = ref
        # each file's data is synced as it is copied; their names only with their directory
        self.store.sync([f"{self.job}/shared", f"{self._chk(n)}/w{worker}"])
        return [files[k] for k in sorted(files)], sum(files[e].size for e, _, _ in jobs)

    def write_metadata(self, n: int, meta: dict[str, Any]) -> None:
        """Make checkpoint ``n`` exist: ``_metadata`` is one atomic, durable, create-only put
        (on a file system: a temporary name, synced, hard-linked, the link synced with
        ``chk-<n>``'s own name; on S3 ``If-None-Match``). The files it lists were made durable
        when uploaded, so after a crash a checkpoint either exists whole or does not exist;
        and a ``_metadata`` is never replaced: a second writer of checkpoint ``n`` (a stale
        job manager) gets ``StorageConflict``, unless the bytes there are its own (a retried
        PUT whose first answer was lost)."""
        key = f"{self._chk(n)}/{METADATA}"
        data = json.dumps(meta, indent=1).encode()
        try:
            self.store.put_new(key, data)
        except StorageConflict:
            found = self.store.get_versioned(key)
            if found is None or found[0] != data:
                raise

    # -- reading ---------------------------------------------------------------------------------

    def _chk_ids(self) -> list[int]:
        return sorted(
            int(d[4:])
            for d in self.store.children(self.job)
            if d.startswith("chk-") and d[4:].isdigit()
        )

    def ids(self, among: list[int] | None = None) -> list[int]:
        """Ids of the checkpoints that have a ``_metadata``, oldest first (of ``among``, the
        ``chk-<n>`` ids already listed, if given)."""
        found = self._chk_ids() if among is None else among
        return [n for n in found if self.store.exists(f"{self._chk(n)}/{METADATA}")]

    def next_id(self) -> int:
        """The id after every checkpoint (complete or not) ever made here."""
        return max(self._chk_ids(), default=0) + 1

    def metadata(self, n: int) -> dict[str, Any]:
        where = f"{self.location(n)}/{METADATA}"
        try:
            meta: dict[str, Any] = json.loads(self.store.get_bytes(f"{self._chk(n)}/{METADATA}"))
        except (StorageError, ValueError) as exc:
            raise StateError(
                f"checkpoint {self.location(n)} has an unreadable _metadata ({where}): {exc}"
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
        file name that is not a plain name, a file missing, outside the job's storage, of the
        wrong size, or (on a file system) with the wrong checksum; objects downloaded from S3
        are checked against their CRC as they arrive."""
        try:
            meta = self.metadata(n)
        except StateError as exc:
            return str(exc)
        expected: dict[str, tuple[int, int | None]] = {}
        for w in meta.get("workers", []):
            for raw in w.get("files", []):
                try:
                    ref = FileRef.from_json(raw)
                except PathRefused as exc:  # the files listed before it are checked first
                    return self.store.check(expected, self.job) or str(exc)
                key = self.key_of(n, int(w["index"]), ref)
                expected[key] = (ref.size, ref.crc32 if verify_checksums else None)
        return self.store.check(expected, self.job)

    def latest_valid(self) -> int | None:
        """The newest checkpoint that can be restored; broken ones are skipped with a log line."""
        for n in reversed(self.ids()):
            problem = self.problem(n)
            if problem is None:
                return n
            log.error("checkpoint chk-%d of job %s is skipped: %s", n, self.job, problem)
        return None

    # -- restoring -------------------------------------------------------------------------------

    def materialize(
        self, n: int, worker: int, files: Iterable[FileRef], target: Path, cache: Path | None = None
    ) -> None:
        """Rebuild worker ``worker``'s RocksDB directory of checkpoint ``n`` at ``target``. SST
        files never change, so they are hard-linked where they can be: from a directory storage
        on the same file system, or from ``cache`` (local copies kept from earlier uploads and
        downloads: a recovery downloads only what it does not have). Everything else is copied
        or downloaded, up to ``UPLOADS`` files at a time, and checked against its CRC-32."""
        shutil.rmtree(target, ignore_errors=True)
        private_dir(target)
        if cache is not None:
            private_dir(cache)

        def fetch(ref: FileRef) -> int:
            """The bytes downloaded for ``ref``."""
            key = self.key_of(n, worker, ref)
            dst = target / ref.name
            if ref.shared is not None and cache is not None and self.store.remote:
                cached = cache / ref.shared
                fetched = 0
                if not (cached.is_file() and cached.stat().st_size == ref.size):
                    self._download(key, ref, cached)
                    fetched = ref.size
                os.link(cached, dst)
                return fetched
            if self.store.remote:
                self._download(key, ref, dst)
                return ref.size
            self.store.get_file(key, dst, immutable=ref.shared is not None)
            return 0

        refs = list(files)
        with ThreadPoolExecutor(UPLOADS, thread_name_prefix="weir-get") as pool:
            fetched = list(pool.map(fetch, refs))
        if self.store.remote:
            log.info(
                "restore chk=%d worker=%d files=%d downloaded=%d bytes=%d local=%d",
                n,
                worker,
                len(refs),
                sum(1 for b in fetched if b),
                sum(fetched),
                sum(1 for r, b in zip(refs, fetched, strict=True) if not b and r.size),
            )

    def _download(self, key: str, ref: FileRef, dst: Path) -> None:
        crc = self.store.get_file(key, dst)
        if crc != ref.crc32:
            dst.unlink(missing_ok=True)
            raise StorageError(
                f"object {self.store.url}/{key} fails its CRC-32 check after download; the "
                "checkpoint is damaged: restore an older one"
            )

    def export(self, n: int, target: CheckpointStorage, scratch: Path) -> None:
        """Copy checkpoint ``n`` with the shared files it references to ``target``,
        ``_metadata`` last (a copy cut short does not exist)."""
        meta = self.metadata(n)
        private_dir(scratch)
        for w in meta["workers"]:
            for raw in w["files"]:
                ref = FileRef.from_json(raw)
                tmp = scratch / (ref.shared or ref.name)
                if self.store.get_file(self.key_of(n, int(w["index"]), ref), tmp) not in (
                    -1,
                    ref.crc32,
                ):
                    raise StorageError(f"{self.location(n)}: {ref.name} fails its CRC-32 check")
                target.store.put_file(target.key_of(n, int(w["index"]), ref), tmp)
                tmp.unlink()
            target.store.sync([f"{target.job}/shared", f"{target._chk(n)}/w{w['index']}"])
        target.write_metadata(n, meta)

    # -- retention -------------------------------------------------------------------------------

    def retain(
        self, keep: int, cache: Path | None = None, protect: set[int] | frozenset[int] = frozenset()
    ) -> list[int]:
        """Delete complete checkpoints beyond the newest ``keep``, incomplete ones older than
        the newest complete one, and shared files no remaining checkpoint references (and
        their local copies in ``cache``). Returns the deleted ids. Call it only while no
        checkpoint is in flight. ``protect``: ids never deleted (the newest committed ones of
        the job's lineage, which a stale job manager's late checkpoints must not push out).

        Never deleted: savepoints, and a checkpoint whose ``_metadata`` cannot be read or
        parsed. Since nobody can tell which shared files such a checkpoint needs, every shared
        file stays while it exists; a warning names it, so that its owner repairs or removes
        it."""
        every = self._chk_ids()
        ids = self.ids(every)
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
        # an aborted checkpoint never had a _metadata
        doomed.update(n for n in every if n not in present and n < newest)
        doomed -= protect
        for n in sorted(doomed):
            self.store.delete_prefix(self._chk(n))
            metas.pop(n, None)
        if not unreadable:
            used = self._delete_unreferenced(metas.values())
            if cache is not None:
                prune_cache(cache, used)
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
                f"checkpoint {self.location(n)} has a malformed _metadata: {exc}"
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
            self.location(n),
        )

    def _delete_unreferenced(self, metas: Iterable[dict[str, Any]]) -> set[str]:
        """Delete the shared files no checkpoint in ``metas`` references; returns the names of
        those they do."""
        used = {
            str(raw["shared"])
            for meta in metas
            for w in meta.get("workers", [])
            for raw in w.get("files", [])
            if raw.get("shared")
        }
        prefix = f"{self.job}/shared/"
        self.store.delete(
            [k for k in self.store.sizes(f"{self.job}/shared") if k[len(prefix) :] not in used]
        )
        return used


def _link_into(cache: Path, name: str, src: Path) -> None:
    """Keep ``src`` as ``cache/name`` (a hard link: no copy); best effort."""
    try:
        private_dir(cache)
        os.link(src, cache / name)
    except FileExistsError:
        pass
    except OSError as exc:
        log.debug("local copy of %s not kept: %s", name, exc)


def prune_cache(cache: Path, keep: set[str]) -> None:
    """Drop the local copies not in ``keep``."""
    if not cache.is_dir():
        return
    for f in cache.iterdir():
        if f.name not in keep and not f.name.startswith("."):
            f.unlink(missing_ok=True)


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "METADATA",
    "CheckpointStorage",
    "FileRef",
    "copy_with_crc",
    "file_crc",
    "now_ms",
    "prune_cache",
]
