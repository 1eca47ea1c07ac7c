"""Where checkpoints are kept: a local directory (``LocalStore``, here) or an S3-compatible
bucket (``s3store.S3Bucket``), behind the one small contract of ``storage.py`` (DESIGN.md,
"Checkpoints"); ``open_store`` opens the one a storage URL names.

Checkpoint objects are written once and never changed, except ``_metadata``, which is written
last with one atomic put (a rename on a file system, one PUT on S3): a checkpoint exists once
it is there. The store knows nothing of checkpoints; ``state/checkpoints.py`` lays them out.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from weir.base.errors import StorageError
from weir.base.files import fsync_dir, private_dir, write_private
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


@contextmanager
def _local_errors(store: LocalStore, key: str, op: str) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError as exc:
        raise StorageError(f"cannot {op} {store.path(key)}: it does not exist") from exc
    except OSError as exc:
        raise StorageError(
            f"cannot {op} {store.path(key)}: {exc.strerror}; check that the checkpoint "
            "directory is writable by this user and the disk is not full"
        ) from exc


def open_store(root: str | Path | StorageLocation) -> ObjectStore:
    where = root if isinstance(root, StorageLocation) else storage_location(root)
    if where.scheme == "s3":
        return S3Bucket(where)
    assert where.path is not None
    return LocalStore(where.path)
