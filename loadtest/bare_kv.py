"""The baseline for the query benchmark: a bare FastAPI endpoint over rocksdict, no weir.

``python -m loadtest.bare_kv DB PORT`` fills ``DB`` with ``ad-<i>`` keys (msgpack values shaped
like a window's accumulators) when it is empty and serves ``GET /kv/{key}`` on 127.0.0.1:PORT,
configured as fast as the stack goes (issue 20: a baseline is never a weakened one).
"""

from __future__ import annotations

import sys

import msgpack
import orjson
import uvicorn
from fastapi import FastAPI, Response
from rocksdict import Options, Rdict


def build(path: str, keys: int = 10_000) -> FastAPI:
    """The fastest honest configuration of the same stack: an ``async def`` route returning raw
    ``orjson`` bytes (no response model, no encoder), served by uvicorn with uvloop, httptools
    and no access log (``serve``)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, opts)
    if db.get(b"ad-0") is None:
        for i in range(keys):
            db.put(f"ad-{i}".encode(), msgpack.packb([i, i * 50, i * 2.5]))
    app = FastAPI()

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


def serve(path: str, port: int) -> None:
    uvicorn.run(
        build(path),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
