"""The columnar loop prototype (``benchmarks.columnar_loop``) equals its brute-force reference on
both kernel implementations: on the peer workload and on a file with late records, blank and
bad lines, and a block cut that falls inside a window."""

from __future__ import annotations

from pathlib import Path

import orjson

from benchmarks.columnar_loop import reference, run
from tests.support.workloads import write_ads
from weir.engine.kernels import Kernels


def test_peer_workload_equals_reference(kernels: Kernels, tmp_path: Path) -> None:
    path = write_ads(tmp_path / "ads.jsonl", 20_000, 300, step_ms=1.0)
    loop, _ = run(kernels, path, block_bytes=4096)
    results = loop.results()
    assert results == reference(path) and len(results) > 300


def test_late_records_and_odd_lines(kernels: Kernels, tmp_path: Path) -> None:
    events = [
        {"id": "a", "event": "impression", "ts": 1_000, "value": 1},
        {"id": "b", "event": "click", "ts": 15_000, "value": 2},  # moves the watermark to 12,999
        {"id": "a", "event": "impression", "ts": 9_999, "value": 5},  # late: [0, 10 s) fired
        {"id": "a", "event": "impression", "ts": 13_000, "value": 2.5},
        {"id": "b", "event": "impression", "ts": 11_000, "value": 1 << 62},
        {"id": "b", "event": "impression", "ts": 11_001, "value": 1 << 62},  # int64 overflow
    ]
    lines = [orjson.dumps(e) for e in events]
    lines.insert(2, b"   ")
    lines.insert(3, b'{"id": "\\u0061", "event": "impression", "ts": 12000, "value": -0.0}')
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loop, _ = run(kernels, path, block_bytes=64)
    want = reference(path)
    assert loop.results() == want and loop.late == 1
    assert want[("b", 20_000)] == [2, 1 << 63] and want[("a", 20_000)] == [2, 2.5]
