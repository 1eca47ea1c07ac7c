"""The baseline for the query benchmark: a bare FastAPI endpoint over rocksdict, no weir.

``python -m loadtest.bare_kv DB PORT`` fills ``DB`` with ``ad-<i>`` keys (msgpack values shaped
like a window's accumulators) when it is empty and serves ``GET /kv/{key}`` on 127.0.0.1:PORT.
"""

from __future__ import annotations

import sys
from typing import Any

import msgpack
import uvicorn
from fastapi import FastAPI, HTTPException
from rocksdict import Options, Rdict


def build(path: str, keys: int = 10_000) -> FastAPI:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, opts)
    if db.get(b"ad-0") is None:
        for i in range(keys):
            db.put(f"ad-{i}".encode(), msgpack.packb([i, i * 50, i * 2.5]))
    app = FastAPI()

    @app.get("/kv/{key}")
    def kv(key: str) -> dict[str, Any]:
        raw = db.get(key.encode())
        if raw is None:
            raise HTTPException(404, f"key {key!r} not found")
        count, total, mean = msgpack.unpackb(raw)
        return {"key": key, "windows": [{"count": count, "total": total, "avg": mean}]}

    return app


if __name__ == "__main__":
    uvicorn.run(build(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
