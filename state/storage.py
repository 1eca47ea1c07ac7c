"""The object-store contract checkpoint storage is written against (``ObjectStore``: objects
named by ``/``-separated keys under one root), where a store is (``StorageLocation``, parsed
from a storage URL by ``storage_location``) and the checksummed copy every store uses
(``copy_with_crc``, ``file_crc``). The stores: ``objectstore.LocalStore`` (a directory) and
``s3store.S3Bucket`` (S3); ``objectstore.open_store`` opens one.

A storage URL is never taken for a local path: ``s3://BUCKET/PREFIX`` is S3, ``file:///dir`` or
a path without a scheme is a directory, and any other scheme is refused with the list of those
weir supports (``storage_location``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from weir.base.errors import ConfigError
from weir.base.files import replacing

SCHEMES = "a local path, file:///PATH or s3://BUCKET/PREFIX"
CHUNK = 1 << 20
MULTIPART_BYTES = 16 << 20  # files larger than this are uploaded in parts
PART_BYTES = 8 << 20
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# a scheme written wrong (``s3:/b/p``, ``s3:b/p``, ``gs:/x``): a URL meant, not a directory
_MISTYPED = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:/|(?:s3|file):)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StorageLocation:
    """A parsed ``--checkpoint-dir``: ``scheme`` is ``"file"`` or ``"s3"``; for S3, ``bucket``
    and ``prefix`` (no leading or trailing ``/``); for a file system, ``path``."""

    scheme: str
    path: Path | None = None
    bucket: str = ""
    prefix: str = ""

    @property
    def url(self) -> str:
        if self.scheme == "s3":
            return f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return str(self.path)

    def child(self, name: str) -> StorageLocation:
        """The location one level below (``name`` is one key segment)."""
        if self.scheme == "s3":
            return StorageLocation("s3", bucket=self.bucket, prefix=join_key(self.prefix, name))
        assert self.path is not None
        return StorageLocation("file", path=self.path / name)

    @property
    def parent(self) -> StorageLocation:
        if self.scheme == "s3":
            return StorageLocation("s3", bucket=self.bucket, prefix=self.prefix.rpartition("/")[0])
        assert self.path is not None
        return StorageLocation("file", path=self.path.parent)

    @property
    def name(self) -> str:
        if self.scheme == "s3":
            return self.prefix.rpartition("/")[2]
        assert self.path is not None
        return self.path.name


def storage_location(value: str | Path, what: str = "`checkpoint_dir`") -> StorageLocation:
    """Parse a storage URL or path; an unknown scheme is a ``ConfigError`` naming the ones
    weir supports."""
    if isinstance(value, Path):
        return StorageLocation("file", path=value)
    text = value.strip()
    m = _SCHEME.match(text)
    if m is None:
        if not text:
            raise ConfigError(f"{what} is empty; give {SCHEMES}")
        if _MISTYPED.match(text):
            raise ConfigError(
                f"{what}={_no_secrets(text)!r} is not a URL weir supports; use {SCHEMES}"
            )
        return StorageLocation("file", path=Path(text))
    scheme = m.group(1).lower()
    parts = urlsplit(text)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"{what}={value!r} names host {parts.netloc!r}; a file URL is file:///PATH"
            )
        return StorageLocation("file", path=Path(parts.path or "/"))
    if scheme == "s3":
        bucket = parts.netloc
        if not bucket or "@" in bucket or parts.query or parts.fragment:
            raise ConfigError(
                f"{what}={_no_secrets(text)!r} is not s3://BUCKET/PREFIX (credentials go in "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, not in the URL)"
            )
        return StorageLocation("s3", bucket=bucket, prefix=parts.path.strip("/"))
    raise ConfigError(f"{what}={_no_secrets(text)!r}: unknown scheme {scheme}://; use {SCHEMES}")


def _no_secrets(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


def join_key(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


class ObjectStore(Protocol):
    """Objects under one root. Keys are relative, ``/``-separated, plain segments."""

    @property
    def url(self) -> str:
        """The root, as a user wrote it (no secrets): for messages."""
        ...

    @property
    def remote(self) -> bool:
        """Reads copy bytes over a network (so a local cache pays)."""
        ...

    def put_file(self, key: str, src: Path) -> tuple[int, int]:
        """Store the file ``src`` at ``key``: ``(size, crc32)``. Its data is durable on return;
        on a file system its name is once ``sync`` is called for its directory."""
        ...

    def put_bytes(self, key: str, data: bytes) -> None:
        """Replace ``key`` with ``data`` atomically and durably."""
        ...

    def get_bytes(self, key: str) -> bytes: ...

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        """``key``'s bytes and its version (S3's ETag; in a directory a hash of the bytes),
        or None when there is no such object."""
        ...

    def put_new(self, key: str, data: bytes) -> str:
        """Create ``key`` with ``data``, atomically and durably, unless it exists
        (``StorageConflict``, and nothing is written); returns its version. S3's
        ``If-None-Match: *``; in a directory a hard link of a synced temporary file."""
        ...

    def put_if(self, key: str, data: bytes, version: str) -> str:
        """Replace ``key`` with ``data`` only while it still has ``version``
        (``StorageConflict`` when it changed or is gone, and nothing is written); returns the
        new version. S3's ``If-Match``; in a directory a compare and rename under an
        exclusive ``flock``."""
        ...

    def exists(self, key: str) -> bool: ...

    def get_file(self, key: str, dst: Path, *, immutable: bool = False) -> int:
        """Write ``key`` to ``dst`` (a new file, ``0600``); returns the CRC-32 of what was
        written, or -1 when the file was linked (``immutable`` objects on the same file
        system are hard-linked, not copied)."""
        ...

    def sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` (a directory-like prefix ending without ``/``), with
        its size."""
        ...

    def children(self, prefix: str) -> set[str]:
        """Names of the "directories" directly below ``prefix``."""
        ...

    def delete(self, keys: Iterable[str]) -> None: ...

    def delete_prefix(self, prefix: str) -> None: ...

    def sync(self, prefixes: Iterable[str]) -> None:
        """Make the names of new objects under each prefix durable (a no-op on S3)."""
        ...

    def check(self, expected: dict[str, tuple[int, int | None]], prefix: str) -> str | None:
        """Why the first of ``expected`` (key under ``prefix`` → size, and CRC-32 when it is
        to be checked) that is not stored so is not (missing, wrong size, wrong CRC, outside
        the store), or None. On S3 one listing gives the sizes; the CRC is checked by
        ``get_file``'s caller as the bytes arrive."""
        ...


def copy_with_crc(src: Path, dst: Path, *, durable: bool = True) -> tuple[int, int]:
    """Copy ``src`` to ``dst`` (through a temporary name, created ``0600``; synced when
    ``durable``) and return ``(size, crc32)``. The new name is durable once ``dst``'s directory
    is synced."""
    crc = 0
    size = 0
    with open(src, "rb") as fin, replacing(dst, durable=durable) as fout:
        while chunk := fin.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            fout.write(chunk)
    return size, crc


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc
