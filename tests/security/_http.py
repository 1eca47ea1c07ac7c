"""Helpers of the HTTP attack tests: an API over a real RocksDB served by uvicorn on loopback in
this process (for tests that need a hook in the API's own objects), and raw-socket requests an
attacker would send (a forged Host, a body that never ends)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import uvicorn
from fastapi import FastAPI

from tests.support import wait_until
from weir import Job, agg, sources, windows
from weir.api.fastpath import Answer
from weir.app import http_guard
from weir.state import cells
from weir.state.keygroups import key_group
from weir.state.rocksdb import RocksState

MAX_PARALLELISM = 128


def sliding_job(tmp: Path) -> Job:
    """A job whose operator ``op`` keeps panes: its keys live under two state ids."""
    job = Job("j", max_parallelism=MAX_PARALLELISM)
    (
        job.source(sources.jsonl(tmp / "in.jsonl"))
        .key_by("id")
        .window(windows.sliding(size_ms=3000, slide_ms=1000))
        .aggregate("op", n=agg.count())
    )
    return job


def write_keys(db_path: Path, job: Job, keys: list[str], panes_only: frozenset[str]) -> None:
    """One window per key, as the operator stores it (cells): fired windows under the
    operator's state id, open panes under its pane state id (``panes_only`` keys have only
    panes; every tenth of the others has both)."""
    op = job.operators["op"]
    assert isinstance(op.state_id, int)
    pane_sid = op.pane_state_id  # type: ignore[union-attr]
    state = RocksState(db_path)
    try:
        for i in range(0, len(keys), 20_000):
            part = keys[i : i + 20_000]
            windows = [k for n, k in enumerate(part, start=i) if k not in panes_only]
            panes = [k for n, k in enumerate(part, start=i) if k in panes_only or n % 10 == 0]
            gen = 1 + i // 20_000  # a generation a batch, as a flush writes them
            state.write(
                _cells(op.state_id, 3000, windows, gen) | _cells(pane_sid, 4000, panes, gen)
            )
        state.flush()
    finally:
        state.close()


def _cells(sid: int, end: int, keys: list[str], gen: int) -> dict[bytes, bytes]:
    """``keys``' window ``end`` (a count of 1 each) as the operator stores it: cells."""
    raw = [k.encode() for k in keys]
    groups = np.array([key_group(k, MAX_PARALLELISM) for k in keys], np.uint16)
    rows = cells.CellRows(raw, groups, [np.ones(len(keys), np.int64)])
    return dict(cells.encode_cells(rows, sid, end, gen))


@dataclass
class Served:
    base_url: str
    port: int
    server: uvicorn.Server


@contextmanager
def serve(app: FastAPI, **config: object) -> Iterator[Served]:
    """``app`` on a free loopback port, in a thread of this process, until the block ends."""
    cfg = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **config)  # type: ignore[arg-type]
    server = uvicorn.Server(cfg)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10.0, what="uvicorn to start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield Served(f"http://127.0.0.1:{port}", port, server)
    finally:
        server.should_exit = True
        thread.join(10.0)


def raw_request(port: int, head: bytes, body_chunks: Iterable[bytes] = ()) -> bytes:
    """Send ``head`` and whatever of ``body_chunks`` the server takes (from another thread, so
    a server that answers early is heard), and return the response's status line and headers
    plus what followed within the read."""
    with socket.create_connection(("127.0.0.1", port), timeout=20.0) as sock:
        sock.sendall(head)

        def pump() -> None:
            try:
                for chunk in body_chunks:
                    sock.sendall(chunk)
            except OSError:
                pass  # the server answered and closed: what an attacker meets

        sender = threading.Thread(target=pump, daemon=True)
        sender.start()
        got = b""
        deadline = time.monotonic() + 20.0
        while b"\r\n\r\n" not in got or not _body_complete(got):
            if time.monotonic() > deadline:
                break
            try:
                part = sock.recv(65536)
            except OSError:
                break
            if not part:
                break
            got += part
        sender.join(20.0)
        return got


def _body_complete(got: bytes) -> bool:
    head, _, body = got.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return True


def direct_protocol(app: FastAPI) -> tuple[type[asyncio.Protocol], list[bool]]:
    """weir's HTTP protocol with ``app``'s direct answers (``api.fastpath.DirectAnswer``), for
    ``serve(app, http=...)``, and the list it fills: for each request offered to the direct
    answers, whether they answered it."""
    direct = app.state.direct
    offered: list[bool] = []

    def counted(path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Answer | None:
        got = direct(path, query, headers)
        offered.append(got is not None)
        return got

    return http_guard.protocol(http_guard.ConnectionGuard(64), direct=counted), offered
