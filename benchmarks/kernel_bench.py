"""Kernel micro benchmark: CPU ns per event of each column kernel, compiled and pure-Python twin,
on the peer workload's file (``benchmarks.hotpath``'s ``peer`` events) at 10k and 1M ids.

    python -m benchmarks.kernel_bench [--events N] [--twin-events N] [--keys K ...]

Each kernel runs over the file's blocks (about 1 MiB of lines each, as ``columnar_loop``); its
inputs are made before the clock starts and only the kernel call is timed (``time.thread_time``).
The twins run on the first ``--twin-events`` events only (they are 10-100x slower); a per-event
figure does not depend much on the count, except at 1M ids, where both see mostly new keys.
Prints JSON: ``{keys: {kernel: {compiled: ns, python: ns, ratio}}}``.
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

from benchmarks.columnar_loop import FIELDS, IMPRESSIONS, blocks
from benchmarks.hotpath import event_file
from weir.engine.kernels import Kernels, load
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.fold import fold_window
from weir.engine.kernels.scan import Scan, scan_block
from weir.engine.watermarks import MIN_WATERMARK

KERNELS = (
    "scan", "filter", "watermarks", "tumbling_ends", "lateness", "intern", "intern_known", "fold",
)  # fmt: skip


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    t0 = time.thread_time()
    fn(*args)
    return time.thread_time() - t0


def measure(k: Kernels, chunks: list[bytes]) -> dict[str, float]:
    """ns per event of each kernel over ``chunks``."""
    spent = dict.fromkeys(KERNELS, 0.0)
    scans: list[Scan] = []
    for c in chunks:
        t0 = time.thread_time()
        scans.append(scan_block(k.scan_lines, c, FIELDS))
        spent["scan"] += time.thread_time() - t0
    interner = k.Interner(128)
    accs: dict[int, Any] = {}
    max_seen = MIN_WATERMARK
    n = 0
    for s in scans:
        n += len(s)
        spent["filter"] += _timed(filter_mask, k, IMPRESSIONS, s)
        ts = np.ascontiguousarray(s.i64[2])
        t0 = time.thread_time()
        wms, max_seen = k.watermarks(ts, max_seen, 2_000)
        spent["watermarks"] += time.thread_time() - t0
        t0 = time.thread_time()
        ends = k.tumbling_ends(ts, 10_000, 0)
        spent["tumbling_ends"] += time.thread_time() - t0
        spent["lateness"] += _timed(k.lateness, ends, wms, 0)
        ss, sl = np.ascontiguousarray(s.ss[0]), np.ascontiguousarray(s.sl[0])
        t0 = time.thread_time()
        kids = interner.intern(s.data, ss, sl)
        spent["intern"] += time.thread_time() - t0
        col = (
            np.ascontiguousarray(s.tags[3]),
            np.ascontiguousarray(s.i64[3]),
            np.ascontiguousarray(s.f64[3]),
        )
        for end in np.unique(ends).tolist():
            m = np.flatnonzero(ends == end)
            part = [None, (col[0][m], col[1][m], col[2][m])]
            sub = kids[m]
            acc = accs.get(end) or accs.setdefault(end, k.WindowAcc(("count", "sum")))
            spent["fold"] += _timed(fold_window, acc, sub, part)
    # the same keys again: every one known, the steady state of a long run (the first pass at
    # 1M ids pays for new keys and the table's growth)
    for s in scans:
        ss, sl = np.ascontiguousarray(s.ss[0]), np.ascontiguousarray(s.sl[0])
        spent["intern_known"] += _timed(interner.intern, s.data, ss, sl)
    return {name: round(v / n * 1e9, 1) for name, v in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--twin-events", type=int, default=200_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "weir-hotpath"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    for keys in args.keys:
        chunks = list(blocks(event_file("peer", args.events, args.workdir, keys), 1 << 20))
        compiled = measure(load("compiled"), chunks)
        twin_chunks, total = [], 0
        for c in chunks:
            if total >= args.twin_events:
                break
            twin_chunks.append(c)
            total += c.count(b"\n")
        twin = measure(load("python"), twin_chunks)
        report[f"{keys}_keys"] = {
            name: {
                "compiled_ns": compiled[name],
                "python_ns": twin[name],
                "speedup": round(twin[name] / compiled[name], 1) if compiled[name] else None,
            }
            for name in KERNELS
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
