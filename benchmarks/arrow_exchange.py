"""The exchange's column encoding for phase 2 of issue 38: one scanned block's (id, ts, value)
columns encoded as an Arrow IPC stream beside an own layout (lengths, key bytes, arrays), and
Arrow's decode; process CPU ns per row over 50 rounds of one block of the peer file.

    python -m benchmarks.arrow_exchange [--events N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.ipc as ipc  # type: ignore[import-untyped]

from benchmarks.columnar_loop import FIELDS, blocks
from benchmarks.hotpath import event_file
from weir.engine.kernels import load
from weir.engine.kernels.scan import scan_block

ROUNDS = 50


def _gather(data: Any, ss: Any, sl: Any) -> tuple[Any, Any]:
    """The key bytes of each view, contiguous, and their offsets (a compiled kernel's copy)."""
    offsets = np.zeros(len(sl) + 1, np.int32)
    np.cumsum(sl, out=offsets[1:])
    index = np.repeat(ss - offsets[:-1], sl) + np.arange(offsets[-1])
    return data[index], offsets


def measure(path: Path) -> dict[str, Any]:
    s = scan_block(load("compiled").scan_lines, next(blocks(path, 1 << 19)), FIELDS)
    n = len(s)
    data = np.frombuffer(s.data, np.uint8)
    ss, sl, ts, v = s.ss[0].copy(), s.sl[0].copy(), s.i64[2].copy(), s.f64[3].copy()

    def own() -> bytes:
        blob, _ = _gather(data, ss, sl)
        return b"".join((sl.tobytes(), blob.tobytes(), ts.tobytes(), v.tobytes()))

    def arrow() -> Any:
        blob, offsets = _gather(data, ss, sl)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(blob)]
        keys = pa.Array.from_buffers(pa.string(), n, buffers)
        batch = pa.RecordBatch.from_arrays(
            [keys, pa.array(ts), pa.array(v)], names=["id", "ts", "value"]
        )
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue()

    encoded = arrow()

    def decode() -> Any:
        return ipc.open_stream(encoded).read_all()

    def per_row(fn: Callable[[], Any]) -> float:
        fn()
        t0 = time.process_time()
        for _ in range(ROUNDS):
            fn()
        return round((time.process_time() - t0) / ROUNDS / n * 1e9, 1)

    return {
        "rows_per_batch": n,
        "own_encode_ns_per_row": per_row(own),
        "arrow_ipc_encode_ns_per_row": per_row(arrow),
        "arrow_ipc_decode_ns_per_row": per_row(decode),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    workdir = Path(tempfile.gettempdir()) / "weir-hotpath"
    workdir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(event_file("peer", args.events, workdir))))


if __name__ == "__main__":
    main()
