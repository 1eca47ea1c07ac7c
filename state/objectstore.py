"""Where checkpoints are kept: a local directory or an S3-compatible bucket, behind one small
contract of objects named by ``/``-separated keys (DESIGN.md, "Checkpoints").

Checkpoint objects are written once and never changed, except ``_metadata``, which is written
last with one atomic put (a rename on a file system, one PUT on S3): a checkpoint exists once
it is there. The store knows nothing of checkpoints; ``state/checkpoints.py`` lays them out.

A storage URL is never taken for a local path: ``s3://BUCKET/PREFIX`` is S3, ``file:///dir`` or
a path without a scheme is a directory, and any other scheme is refused with the list of those
weir supports (``storage_location``).

S3 is configured as the AWS tools are: ``AWS_ENDPOINT_URL`` (an S3-compatible server; ``http://``
allowed), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``;
``WEIR_S3_ADDRESSING`` = ``path`` or ``virtual`` chooses the request style (default: path with
an endpoint, virtual without, as AWS wants). The client is obstore (Rust's ``object_store``):
multipart uploads for large files, retries with exponential backoff and jitter, bounded time.
"""

from __future__ import annotations

import os
import re
import shutil
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from weir.engine.errors import ConfigError, StorageError
from weir.engine.redact import redact_text, redact_url
from weir.state.files import fsync_dir, private_dir, replacing, write_private

if TYPE_CHECKING:
    from obstore.store import S3Store

SCHEMES = "a local path, file:///PATH or s3://BUCKET/PREFIX"
_CHUNK = 1 << 20
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
            return StorageLocation("s3", bucket=self.bucket, prefix=_join(self.prefix, name))
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


def storage_location(value: str | Path, what: str = "--checkpoint-dir") -> StorageLocation:
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


def _join(prefix: str, key: str) -> str:
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


class S3Bucket:
    """A prefix of an S3 bucket (AWS or any S3-compatible server), through obstore."""

    remote = True

    def __init__(self, where: StorageLocation, env: dict[str, str] | None = None) -> None:
        self.where = where
        # only what configures S3: this object crosses process boundaries
        self._env = {
            k: v
            for k, v in (os.environ if env is None else env).items()
            if k.startswith(("AWS_", "WEIR_S3_"))
        }
        self._store: S3Store | None = None

    @property
    def url(self) -> str:
        return self.where.url

    @property
    def endpoint(self) -> str | None:
        return self._env.get("AWS_ENDPOINT_URL_S3") or self._env.get("AWS_ENDPOINT_URL") or None

    @property
    def store(self) -> S3Store:
        """Made on first use, so that an object of this class crosses a process boundary as
        its settings only."""
        if self._store is None:
            self._store = _s3_store(self.where, self._env, self.endpoint)
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        return {"where": self.where, "env": self._env}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["where"], state["env"])  # type: ignore[misc]

    def _key(self, key: str) -> str:
        return _join(self.where.prefix, key)

    def put_file(self, key: str, src: Path) -> tuple[int, int]:
        import obstore

        size = src.stat().st_size
        crc = file_crc(src)
        with self._errors(key, "upload"):
            obstore.put(
                self.store,
                self._key(key),
                src,
                use_multipart=size > MULTIPART_BYTES,
                chunk_size=PART_BYTES,
                max_concurrency=4,
            )
        return size, crc

    def put_bytes(self, key: str, data: bytes) -> None:
        import obstore

        with self._errors(key, "write"):
            obstore.put(self.store, self._key(key), data, use_multipart=False)

    def get_bytes(self, key: str) -> bytes:
        import obstore

        with self._errors(key, "read"):
            return bytes(obstore.get(self.store, self._key(key)).bytes())

    def exists(self, key: str) -> bool:
        import obstore

        try:
            with self._errors(key, "check"):
                obstore.head(self.store, self._key(key))
        except StorageError as exc:
            if _not_found(exc.__cause__) and "NoSuchBucket" not in str(exc.__cause__):
                return False
            raise
        return True

    def get_file(self, key: str, dst: Path, *, immutable: bool = False) -> int:
        import obstore

        crc = 0
        with self._errors(key, "download"), replacing(dst) as out:
            for chunk in obstore.get(self.store, self._key(key)).stream(_CHUNK * 8):
                crc = zlib.crc32(chunk, crc)
                out.write(chunk)
        return crc

    def sizes(self, prefix: str) -> dict[str, int]:
        import obstore

        full = self._key(prefix) + "/"
        strip = len(self.where.prefix) + 1 if self.where.prefix else 0
        out: dict[str, int] = {}
        with self._errors(prefix, "list"):
            for chunk in obstore.list(self.store, prefix=full):
                for meta in chunk:
                    out[meta["path"][strip:]] = int(meta["size"])
        return out

    def children(self, prefix: str) -> set[str]:
        import obstore

        full = self._key(prefix) + "/"
        with self._errors(prefix, "list"):
            found = obstore.list_with_delimiter(self.store, prefix=full)
        return {p.rstrip("/").rpartition("/")[2] for p in found["common_prefixes"]}

    def delete(self, keys: Iterable[str]) -> None:
        import obstore

        batch = [self._key(k) for k in keys]
        for i in range(0, len(batch), 1000):
            with self._errors(batch[i], "delete"):
                obstore.delete(self.store, batch[i : i + 1000])

    def delete_prefix(self, prefix: str) -> None:
        self.delete(list(self.sizes(prefix)))

    def sync(self, prefixes: Iterable[str]) -> None:
        return None  # a completed PUT is durable

    def check(self, expected: dict[str, tuple[int, int | None]], prefix: str) -> str | None:
        listed = self.sizes(prefix) if expected else {}
        for key, (size, _) in expected.items():
            if key not in listed:
                return f"object {self.url}/{key} is missing"
            if listed[key] != size:
                return f"object {self.url}/{key} has {listed[key]} bytes, not {size}"
        return None

    @contextmanager
    def _errors(self, key: str, op: str) -> Iterator[None]:
        try:
            yield
        except StorageError:
            raise
        except Exception as exc:
            raise s3_error(exc, f"{self.url}/{key}", op, self.endpoint) from exc


def _s3_store(where: StorageLocation, env: dict[str, str], endpoint: str | None) -> S3Store:
    from obstore.store import S3Store

    addressing = env.get("WEIR_S3_ADDRESSING", "").strip().lower() or (
        "path" if endpoint else "virtual"
    )
    if addressing not in ("path", "virtual"):
        raise ConfigError(f"WEIR_S3_ADDRESSING={addressing!r} is not valid; use path or virtual")
    config: dict[str, Any] = {
        "region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        "virtual_hosted_style_request": addressing == "virtual",
    }
    if endpoint:
        config["endpoint"] = endpoint
    for name, key in (
        ("AWS_ACCESS_KEY_ID", "access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
        ("AWS_SESSION_TOKEN", "token"),
    ):
        if env.get(name):
            config[key] = env[name]
    try:
        return S3Store(
            where.bucket,
            client_options={
                "allow_http": bool(endpoint and endpoint.startswith("http://")),
                "connect_timeout": timedelta(seconds=5),
                "timeout": timedelta(seconds=60),
            },
            retry_config={
                "max_retries": 4,
                "retry_timeout": timedelta(seconds=10),
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=3),
                    "base": 2,
                },
            },
            **config,
        )
    except Exception as exc:  # obstore checks its settings here
        raise ConfigError(
            f"cannot configure S3 storage {where.url}: {redact_text(str(exc))}"
        ) from None


def s3_error(exc: BaseException, where: str, op: str, endpoint: str | None) -> StorageError:
    """One line naming the object, what went wrong in S3's terms, and what to check."""
    from obstore import exceptions as ox

    # the endpoint's userinfo and whatever the client's message quotes of the request are
    # never shown: this line reaches logs and /health
    text = redact_text(str(exc))
    server = redact_url(endpoint) if endpoint else "AWS S3"
    if "NoSuchBucket" in text:
        fix = f"the bucket does not exist at {server}: create it, or fix the bucket name"
    elif "RequestTimeTooSkewed" in text:
        fix = "this machine's clock differs from the server's by too much: sync it (NTP)"
    elif _not_found(exc):
        return StorageError(f"cannot {op} {where}: it does not exist")
    elif isinstance(exc, ox.PermissionDeniedError | ox.UnauthenticatedError) or (
        "AccessDenied" in text or "InvalidAccessKeyId" in text or "SignatureDoesNotMatch" in text
    ):
        fix = (
            "access denied: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and that they may "
            "read and write this bucket and prefix"
        )
    elif "error sending request" in text or "Connection refused" in text or "dns" in text:
        fix = (
            f"cannot reach {server}: check AWS_ENDPOINT_URL (scheme, host and port) and that "
            "the server is up"
        )
    else:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        fix = f"{first[:300]}; check AWS_ENDPOINT_URL, the credentials and the bucket"
    return StorageError(f"cannot {op} {where}: {fix}")


def _not_found(exc: BaseException | None) -> bool:
    """obstore reports a missing object as the built-in ``FileNotFoundError`` (its own
    ``NotFoundError`` is deprecated and no longer raised)."""
    from obstore import exceptions as ox

    return isinstance(exc, FileNotFoundError | ox.NotFoundError)


def open_store(root: str | Path | StorageLocation) -> ObjectStore:
    where = root if isinstance(root, StorageLocation) else storage_location(root)
    if where.scheme == "s3":
        return S3Bucket(where)
    assert where.path is not None
    return LocalStore(where.path)


def copy_with_crc(src: Path, dst: Path, *, durable: bool = True) -> tuple[int, int]:
    """Copy ``src`` to ``dst`` (through a temporary name, created ``0600``; synced when
    ``durable``) and return ``(size, crc32)``. The new name is durable once ``dst``'s directory
    is synced."""
    crc = 0
    size = 0
    with open(src, "rb") as fin, replacing(dst, durable=durable) as fout:
        while chunk := fin.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            fout.write(chunk)
    return size, crc


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


__all__ = [
    "SCHEMES",
    "LocalStore",
    "ObjectStore",
    "S3Bucket",
    "StorageLocation",
    "copy_with_crc",
    "file_crc",
    "open_store",
    "storage_location",
]
