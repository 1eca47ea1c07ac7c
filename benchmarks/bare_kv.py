"""The baseline for the query benchmark: a bare FastAPI endpoint over rocksdict, no weir.

``python -m benchmarks.bare_kv DB PORT [PROCESSES]`` fills ``DB`` with ``ad-<i>`` keys (msgpack
values shaped like a window's accumulators) when it is empty and serves ``GET /kv/{key}`` on
127.0.0.1:PORT, configured as fast as the stack goes (issue 20: a baseline is never a weakened
one). With PROCESSES > 1 it serves from that many processes on the one port with
``SO_REUSEPORT``, as ``weir api --workers N`` does, each reading the database read-only.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import threading
from multiprocessing.connection import wait

import msgpack
import orjson
import uvicorn
from fastapi import FastAPI, Response
from rocksdict import AccessType, Options, Rdict


def fill(path: str, keys: int = 10_000) -> None:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, opts)
    try:
        if db.get(b"ad-0") is None:
            for i in range(keys):
                db.put(f"ad-{i}".encode(), msgpack.packb([i, i * 50, i * 2.5]))
    finally:
        db.close()


def build(path: str) -> FastAPI:
    """The fastest honest configuration of the same stack: an ``async def`` route returning raw
    ``orjson`` bytes (no response model, no encoder), served by uvicorn with uvloop, httptools
    and no access log (``serve``), and without FastAPI's OpenTelemetry hooks (weir's app has
    them off too: they ask the global providers on every request)."""
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    app = FastAPI(telemetry={"tracing": False, "metrics": False, "logs": False})

    @app.get("/kv/{key}")
    async def kv(key: str) -> Response:
        raw = db.get(key.encode())
        if raw is None:
            missing = {"error": {"code": "key_not_found", "message": f"key {key!r} not found"}}
            return Response(orjson.dumps(missing), status_code=404, media_type="application/json")
        count, total, mean = msgpack.unpackb(raw)
        found = {"key": key, "windows": [{"count": count, "total": total, "avg": mean}]}
        return Response(orjson.dumps(found), media_type="application/json")

    return app


def _listen(port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    return sock


def _exit_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os._exit(0)


def serve_one(path: str, port: int, reuse_port: bool) -> None:
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    config = uvicorn.Config(
        build(path),
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=[_listen(port, reuse_port)])


def serve(path: str, port: int, processes: int = 1) -> None:
    fill(path)
    ctx = multiprocessing.get_context("spawn")
    others = [
        ctx.Process(target=serve_one, args=(path, port, True), daemon=True)
        for _ in range(processes - 1)
    ]
    for p in others:
        p.start()
    # uvicorn re-raises the SIGTERM that stopped it; ignored, the members are stopped below
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        serve_one(path, port, processes > 1)
    finally:
        for p in others:
            p.terminate()
            p.join(10)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
