"""Where checkpoints are kept: a local directory (``LocalStore``, here) or an S3-compatible
bucket (``s3store.S3Bucket``), behind the one small contract of ``storage.py`` (DESIGN.md,
"Checkpoints"); ``open_store`` opens the one a storage URL names.

Checkpoint objects are written once and never changed; ``_metadata`` is written last, created
with one atomic create-only put (a hard link on a file system, a PUT with ``If-None-Match`` on
S3): a checkpoint exists once it is there, and nobody can write it twice. The job's lease
(``state/lease.py``) is the one object that is replaced, only while unchanged since it was
read (``put_if``). The store knows nothing of checkpoints; ``state/checkpoints.py`` lays them
out.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from weir.base.errors import StorageConflict, StorageError
from weir.base.files import FILE_MODE, fsync_dir, open_private, private_dir, write_private
from weir.state.s3store import S3Bucket, s3_error
from weir.state.storage import (
    SCHEMES,
    ObjectStore,
    StorageLocation,
    copy_with_crc,
    file_crc,
    storage_location,
)

# the names checkpoint storage and the command line take from here
__all__ = [
    "SCHEMES",
    "LocalStore",
    "ObjectStore",
    "S3Bucket",
    "StorageLocation",
    "copy_with_crc",
    "file_crc",
    "open_store",
    "s3_error",
    "storage_location",
]


class LocalStore:
    """A directory: objects are files, private to the user (``0700`` dirs, ``0600`` files)."""

    remote = False

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def url(self) -> str:
        return str(self.root)

    def path(self, key: str) -> Path:
        return self.root / key

    def put_file(self, key: str, src: Path) -> tuple[int, int]:
        dst = self.path(key)
        with _local_errors(self, key, "write"):
            private_dir(dst.parent)
            return copy_with_crc(src, dst)

    def put_bytes(self, key: str, data: bytes) -> None:
        dst = self.path(key)
        with _local_errors(self, key, "write"):
            private_dir(dst.parent)
            write_private(dst, data, durable=True)
            if dst.parent != self.root:
                fsync_dir(dst.parent.parent)  # holds the name of the directory just made

    def get_bytes(self, key: str) -> bytes:
        with _local_errors(self, key, "read"):
            return self.path(key).read_bytes()

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _local_error(self, key, "read", exc) from exc
        return data, _version(data)

    def put_new(self, key: str, data: bytes) -> str:
        dst = self.path(key)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.new")
        with _local_errors(self, key, "write"):
            private_dir(dst.parent)
            write_private(tmp, data, durable=True)
            try:
                os.link(tmp, dst)  # fails if dst exists, whoever made it: create-only
            except FileExistsError:
                raise StorageConflict(f"cannot create {dst}: it exists already") from None
            finally:
                tmp.unlink(missing_ok=True)
            fsync_dir(dst.parent)
            if dst.parent != self.root:
                fsync_dir(dst.parent.parent)
        return _version(data)

    def put_if(self, key: str, data: bytes, version: str) -> str:
        dst = self.path(key)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.next")
        with _local_errors(self, key, "write"):
            # the new bytes are on disk before the lock is taken: the lock covers the compare
            # and the rename alone, so a writer stopped inside it (SIGSTOP, a long pause)
            # blocks the others for as short a window as there can be
            with os.fdopen(open_private(tmp), "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                with _locked(dst.with_name(f".{dst.name}.lock")):
                    try:
                        now = _version(dst.read_bytes())
                    except FileNotFoundError:
                        raise StorageConflict(f"cannot replace {dst}: it is gone") from None
                    if now != version:
                        raise StorageConflict(f"cannot replace {dst}: it changed since it was read")
                    os.replace(tmp, dst)
            finally:
                tmp.unlink(missing_ok=True)
            fsync_dir(dst.parent)
        return _version(data)

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def get_file(self, key: str, dst: Path, *, immutable: bool = False) -> int:
        src = self.path(key)
        if immutable:
            try:
                os.link(src, dst)
                return -1
            except OSError:
                pass
        with _local_errors(self, key, "read"):
            return copy_with_crc(src, dst, durable=False)[1]

    def sizes(self, prefix: str) -> dict[str, int]:
        base = self.path(prefix)
        out: dict[str, int] = {}
        if not base.is_dir():
            return out
        for dirpath, _dirs, files in os.walk(base):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for f in files:
                try:
                    out[f"{rel}/{f}"] = os.stat(os.path.join(dirpath, f)).st_size
                except FileNotFoundError:
                    continue
        return out

    def children(self, prefix: str) -> set[str]:
        base = self.path(prefix)
        if not base.is_dir():
            return set()
        return {d.name for d in base.iterdir() if d.is_dir()}

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.path(key).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        shutil.rmtree(self.path(prefix), ignore_errors=True)

    def sync(self, prefixes: Iterable[str]) -> None:
        for prefix in prefixes:
            d = self.path(prefix)
            if d.is_dir():
                fsync_dir(d)

    def check(self, expected: dict[str, tuple[int, int | None]], prefix: str) -> str | None:
        for key, (size, crc32) in expected.items():
            problem = self._verify(key, size, crc32)
            if problem is not None:
                return problem
        return None

    def _verify(self, key: str, size: int, crc32: int | None) -> str | None:
        path = self.path(key)
        if not path.exists():
            return f"file {path} is missing"
        base = self.root.resolve()
        if not path.resolve().is_relative_to(base):
            return f"file {path} is a symlink to {path.resolve()}, outside {base}"
        if path.stat().st_size != size:
            return f"file {path} has {path.stat().st_size} bytes, expected {size}"
        if crc32 is not None and file_crc(path) != crc32:
            return f"file {path} fails its CRC-32 check"
        return None


def _version(data: bytes) -> str:
    """A directory's version of an object: what its bytes hash to (S3's ETag is their MD5)."""
    return hashlib.sha256(data).hexdigest()


LOCK_WAIT_S = 10.0  # a compare-and-replace holds its lock for a read and a rename


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created ``0600``): the compare and the rename of a
    ``put_if`` are one step for every process that replaces the object, on this host or, on a
    network file system with working locks (NFSv4, CephFS), on another. The kernel releases it
    when its holder dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StorageError(
                        f"cannot lock {path}: another process held it for {LOCK_WAIT_S:.0f} s "
                        "(one that is stopped or paused in the middle of a write holds it "
                        "until it runs again or dies)"
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)


@contextmanager
def _local_errors(store: LocalStore, key: str, op: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise _local_error(store, key, op, exc) from exc


def _local_error(store: LocalStore, key: str, op: str, exc: OSError) -> StorageError:
    if isinstance(exc, FileNotFoundError):
        return StorageError(f"cannot {op} {store.path(key)}: it does not exist")
    return StorageError(
        f"cannot {op} {store.path(key)}: {exc.strerror}; check that the checkpoint "
        "directory is writable by this user and the disk is not full"
    )


def open_store(root: str | Path | StorageLocation) -> ObjectStore:
    where = root if isinstance(root, StorageLocation) else storage_location(root)
    if where.scheme == "s3":
        return S3Bucket(where)
    assert where.path is not None
    return LocalStore(where.path)
