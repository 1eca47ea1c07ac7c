"""Checkpoint storage in an S3-compatible bucket (``S3Bucket``, one ``ObjectStore`` of
``storage.py``).

S3 is configured as the AWS tools are: ``AWS_ENDPOINT_URL`` (an S3-compatible server; ``http://``
allowed), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``;
``WEIR_S3_ADDRESSING`` = ``path`` or ``virtual`` chooses the request style (default: path with
an endpoint, virtual without, as AWS wants). The client is obstore (Rust's ``object_store``):
multipart uploads for large files, retries with exponential backoff and jitter, bounded time.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.base.errors import ConfigError, StorageConflict, StorageError
from weir.base.extras import require
from weir.base.files import replacing
from weir.base.redact import redact_text, redact_url
from weir.base.settings import Choice, Setting, read_env
from weir.state.storage import (
    CHUNK,
    MULTIPART_BYTES,
    PART_BYTES,
    StorageLocation,
    file_crc,
    join_key,
)

if TYPE_CHECKING:
    from obstore.store import S3Store


def _aws(name: str, help: str, *, secret: bool = False) -> Setting:
    return Setting(name.lower(), help, env=name, env_only=True, secret=secret)


# what configures S3, read as the AWS tools read it; every ``AWS_*`` variable is passed on
S3_SETTINGS: tuple[Setting, ...] = (
    _aws("AWS_ENDPOINT_URL", "an S3-compatible server (http:// allowed); default: AWS"),
    _aws("AWS_ENDPOINT_URL_S3", "the same for S3 alone (wins over AWS_ENDPOINT_URL)"),
    _aws("AWS_ACCESS_KEY_ID", "the access key"),
    _aws("AWS_SECRET_ACCESS_KEY", "its secret", secret=True),
    _aws("AWS_SESSION_TOKEN", "a session token (temporary credentials)", secret=True),
    _aws("AWS_REGION", "the bucket's region (default: AWS_DEFAULT_REGION, else us-east-1)"),
    _aws("AWS_DEFAULT_REGION", "the region when AWS_REGION is unset"),
    Setting("s3_addressing", "path or virtual: the request style (default: path with an "
            "endpoint, virtual without, as AWS wants)", check=Choice(("path", "virtual")),
            env="WEIR_S3_ADDRESSING", env_only=True),
)  # fmt: skip
ADDRESSING = S3_SETTINGS[-1]


class S3Bucket:
    """A prefix of an S3 bucket (AWS or any S3-compatible server), through obstore."""

    remote = True

    def __init__(self, where: StorageLocation, env: dict[str, str] | None = None) -> None:
        require("s3", f"checkpoint storage on S3 ({where.url})")
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
        return join_key(self.where.prefix, key)

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

    def get_versioned(self, key: str) -> tuple[bytes, str] | None:
        import obstore

        try:
            with self._errors(key, "read"):
                got = obstore.get(self.store, self._key(key))
                data = bytes(got.bytes())
        except StorageError as exc:
            if _not_found(exc.__cause__) and "NoSuchBucket" not in str(exc.__cause__):
                return None
            raise
        return data, str(got.meta["e_tag"])

    def put_new(self, key: str, data: bytes) -> str:
        return self._put_conditional(key, data, "create")

    def put_if(self, key: str, data: bytes, version: str) -> str:
        return self._put_conditional(key, data, {"e_tag": version})

    def _put_conditional(self, key: str, data: bytes, mode: Any) -> str:
        """One PUT with ``If-None-Match: *`` (``mode`` "create") or ``If-Match`` (an ETag):
        the server decides atomically (SeaweedFS and AWS S3 both do)."""
        import obstore
        from obstore import exceptions as ox

        try:
            with self._errors(key, "write"):
                done = obstore.put(self.store, self._key(key), data, mode=mode)
        except StorageError as exc:
            cause = exc.__cause__
            gone = _not_found(cause) and "NoSuchBucket" not in str(cause)
            if isinstance(cause, ox.AlreadyExistsError | ox.PreconditionError) or gone:
                what = "it exists already" if mode == "create" else "it changed since it was read"
                raise StorageConflict(f"cannot write {self.url}/{key}: {what}") from cause
            raise
        return str(done["e_tag"])

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
            for chunk in obstore.get(self.store, self._key(key)).stream(CHUNK * 8):
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

    addressing = read_env(ADDRESSING, env) or ("path" if endpoint else "virtual")
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
