"""Where a point lookup's time goes inside the app: microseconds per request through the ASGI app
alone (no server, no socket), for weir's fast path (``api.fastpath``), the same lookup through
the FastAPI route, and the bare endpoint (``benchmarks.bare_kv``), over the same number of keys in
real RocksDB files. What uvicorn costs (parsing, the socket write) comes on top of each alike.

    python -m benchmarks.query_asgi

Each figure is the best of 7 runs of 5,000 requests (the host is shared; the best run is the
one least disturbed).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import bare_kv
from weir import Job, agg, sources, windows
from weir.api import JobHandle, Registry, create_app
from weir.state import cells
from weir.state.keygroups import key_group
from weir.state.rocksdb import RocksState
from weir.state.secondary import SecondaryReader

KEYS = 2_000
RUNS, REQUESTS = 7, 5_000
Scope = dict[str, Any]


class _Runtime:
    """What a point lookup asks of the job's runtime: one worker, no watermark yet."""

    parallelism = 1
    generation = 0
    last_checkpoint = None

    def operator_watermark(self, op: str) -> int:
        return -(2**63)

    def state_watermark(self, op: str) -> int:
        return -(2**63)

    state_retention_ms = None


def _job(tmp: Path) -> Job:
    job = Job("j", max_parallelism=128)
    (
        job.source(sources.jsonl(tmp / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=10_000))
        .aggregate("op", n=agg.count())
    )
    return job


def _fill(path: Path, job: Job) -> None:
    """Two windows per key, as the operator stores them (state format 2: cells)."""
    op = job.operators["op"]
    keys = [f"ad-{i}" for i in range(KEYS)]
    raw = [k.encode() for k in keys]
    groups = np.array([key_group(k, job.max_parallelism) for k in keys], np.uint16)
    rows = cells.CellRows(raw, groups, [np.arange(KEYS, dtype=np.int64)])
    state = RocksState(path)
    try:
        for end in (10_000, 20_000):
            state.write(dict(cells.encode_cells(rows, op.state_id, end, 0)))
        state.flush()
    finally:
        state.close()


def _scope(path: str, query: bytes = b"") -> Scope:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query, "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk"), (b"accept", b"*/*")],
    }  # fmt: skip


async def _per_request_us(app: Any, scope: Callable[[int], Scope]) -> dict[str, Any]:
    statuses: set[int] = set()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.add(message["status"])

    await app(scope(0), receive, send)  # one first: error answers are not timed (nor logged)
    if statuses != {200}:
        return {"statuses": sorted(statuses)}
    best = float("inf")
    for _ in range(RUNS):
        t0 = time.perf_counter()
        for i in range(REQUESTS):
            await app(scope(i), receive, send)
        best = min(best, (time.perf_counter() - t0) / REQUESTS)
    return {"us_per_request": round(best * 1e6, 1), "statuses": sorted(statuses)}


async def _measure(tmp: Path) -> dict[str, Any]:
    job = _job(tmp)
    _fill(tmp / "db", job)
    registry = Registry()
    reader = SecondaryReader(tmp / "db", tmp / "secondary")
    registry.add(JobHandle(job, _Runtime(), [reader]))  # type: ignore[arg-type]
    weir = create_app(registry)
    bare_kv.fill(str(tmp / "bare"), KEYS)
    bare = bare_kv.build(str(tmp / "bare"))
    try:
        return {
            "weir_fast_path": await _per_request_us(
                weir, lambda i: _scope(f"/j/op/state/ad-{i % KEYS}", b"limit=5")
            ),
            # timeout_ms without a bound changes no answer, but only the route takes it
            "weir_fastapi_route": await _per_request_us(
                weir, lambda i: _scope(f"/j/op/state/ad-{i % KEYS}", b"limit=5&timeout_ms=1")
            ),
            "bare_fastapi_rocksdict": await _per_request_us(
                bare, lambda i: _scope(f"/kv/ad-{i % KEYS}")
            ),
        }
    finally:
        registry.close()


def measure(workdir: Path) -> dict[str, Any]:
    """Each path's figure; a path whose answers were not all 200 has an ``error`` instead (a
    figure of error answers measures the error path)."""
    found = asyncio.run(_measure(workdir))
    for name, figure in found.items():
        if "us_per_request" not in figure:
            found[name] = {
                "error": f"answered {figure['statuses']}, not [200]: its state fill or its "
                "runtime stand-in no longer matches what the route reads",
                "statuses": figure["statuses"],
            }
    return found


if __name__ == "__main__":
    print(json.dumps(measure(Path(tempfile.mkdtemp(prefix="weir-query-asgi-"))), indent=2))
