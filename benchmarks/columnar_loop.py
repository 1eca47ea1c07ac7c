"""A prototype of the columnar worker loop (issue 38, phase 1), not wired into the engine:
raw line blocks -> field scanner -> filter expression -> per-record watermarks -> tumbling
window ends and lateness -> key interning (and key groups) -> fold into per-window arrays ->
firing, over the peer workload's file, checked against a brute-force dict reference.

    python -m benchmarks.columnar_loop [--events N] [--keys K ...] [--kernels compiled|python]

The job is the peer job: filter impressions, key by ``id``, 10 s tumbling count + sum of
``value``, 2 s out-of-orderness bound, no allowed lateness. Prints JSON: CPU ns per event of the
whole loop and of each step (``time.thread_time``; this process has no other busy thread), with
``fire`` (building each fired window's rows as Python values) apart, the counts of events, late
records and scanner fallbacks, and whether the result equals the reference. What it leaves out,
which the integrated loop adds: state writes, top-N, status, barriers, dead-letter reasons (the
rows are counted), sinks.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from benchmarks.hotpath import event_file
from weir.engine.kernels import Kernels, ir, load
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.fold import fold_window
from weir.engine.kernels.scan import FLOAT, INT, OK, STR, scan_block
from weir.engine.kernels.timek import ON_TIME
from weir.engine.watermarks import MIN_WATERMARK

FIELDS = ("id", "event", "ts", "value")
WINDOW_MS = 10_000
BOUND_MS = 2_000
MAX_PARALLELISM = 128
IMPRESSIONS = ir.Cmp("eq", ir.Col("event"), ir.Lit("impression"))
STEPS = ("scan", "filter", "watermarks", "windows", "intern", "fold", "fire")
Results = dict[tuple[str, int], list[Any]]


def blocks(path: Path, block_bytes: int) -> Iterator[bytes]:
    """``path`` in blocks of whole lines of about ``block_bytes``."""
    rest = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(block_bytes):
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            if cut == 0:
                rest = chunk
                continue
            rest = chunk[cut:]
            yield chunk[:cut]
    if rest:
        yield rest


class Loop:
    """The loop's state: the interner, open windows, the split's max event time."""

    def __init__(self, kernels: Kernels, parallelism: int = 1) -> None:
        self.k = kernels
        self.interner = kernels.Interner(MAX_PARALLELISM)
        self.accs: dict[int, Any] = {}
        self.max_seen = MIN_WATERMARK
        self.parallelism = parallelism
        self.spent = dict.fromkeys(STEPS, 0.0)
        self.events = self.late = self.fallbacks = self.dropped = 0
        self.fired: list[tuple[int, Any, list[Any]]] = []

    def block(self, block: bytes) -> None:
        k, clock, spent = self.k, time.thread_time, self.spent
        t0 = clock()
        scan = scan_block(k.scan_lines, block, FIELDS)
        self.events += len(scan)
        self.fallbacks += scan.fallbacks
        t1 = clock()
        keep, _errors = filter_mask(k, IMPRESSIONS, scan)
        t2 = clock()
        # the chain's order: watermarks over every record with a valid time, then the filter
        timed = (scan.status == OK) & (scan.tags[2] == INT)
        wms_all, self.max_seen = k.watermarks(scan.i64[2][timed], self.max_seen, BOUND_MS)
        t3 = clock()
        vt = scan.tags[3]
        sel_in_timed = (keep & (scan.tags[0] == STR) & ((vt == INT) | (vt == FLOAT)))[timed]
        rows = np.flatnonzero(timed)[sel_in_timed]
        self.dropped += int(np.count_nonzero(timed)) - len(rows)
        ends = k.tumbling_ends(scan.i64[2][rows], WINDOW_MS, 0)
        on = k.lateness(ends, wms_all[sel_in_timed], 0) == ON_TIME
        self.late += len(rows) - int(np.count_nonzero(on))
        rows, ends = rows[on], ends[on]
        t4 = clock()
        kids = self.interner.intern(scan.data, scan.ss[0][rows], scan.sl[0][rows])
        if self.parallelism > 1:
            self.interner.partitions(kids, self.parallelism)
        t5 = clock()
        values = (vt[rows], scan.i64[3][rows], scan.f64[3][rows])
        one = len(ends) and bool((ends == ends[0]).all())  # the common case: one window
        for end in [int(ends[0])] if one else np.unique(ends).tolist():
            m = slice(None) if one else ends == end
            acc = self.accs.get(end)
            if acc is None:
                acc = self.accs[end] = k.WindowAcc(("count", "sum"))
            fold_window(acc, kids[m], [None, (values[0][m], values[1][m], values[2][m])])
        t6 = clock()
        self.fire(self.max_seen - BOUND_MS - 1)
        t7 = clock()
        for name, dt in zip(
            STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6), strict=True
        ):
            spent[name] += dt

    def fire(self, watermark: int) -> None:
        """Fire every window the watermark passed, as columns (``WindowAcc.export``): what
        phase 2 hands the state writes and sinks, with no Python call per key."""
        for end in sorted(e for e in self.accs if e - 1 <= watermark):
            acc = self.accs.pop(end)
            acc.take_dirty()
            self.fired.append((end, *acc.export()))

    def results(self) -> Results:
        """The fired windows as ``{(key, end): slots}`` (for the check; not timed)."""
        keys = self.interner.keys()
        out: Results = {}
        for end, ids, columns in self.fired:
            values = [c.tolist() if isinstance(c, np.ndarray) else c for c in columns]
            for row, kid in enumerate(ids.tolist()):
                out[(keys[kid], end)] = [c[row] for c in values]
        return out


def reference(path: Path) -> Results:
    """The brute-force answer: one record at a time, in dicts."""
    out: Results = {}
    max_seen = MIN_WATERMARK
    with open(path, "rb") as fh:
        for line in fh:
            if line.isspace():  # skipped, as the chain does
                continue
            r = orjson.loads(line)
            t = r["ts"]
            wm = max(max_seen - BOUND_MS - 1, MIN_WATERMARK)
            max_seen = max(max_seen, t)
            if r["event"] != "impression":
                continue
            end = t - t % WINDOW_MS + WINDOW_MS
            if end - 1 <= wm:
                continue
            a = out.get((r["id"], end))
            if a is None:
                out[(r["id"], end)] = [1, r["value"]]
            else:
                a[0] += 1
                a[1] += r["value"]
    return out


def run(kernels: Kernels, path: Path, block_bytes: int, parallelism: int = 1) -> tuple[Loop, float]:
    """The loop over ``path``; returns it and its thread CPU seconds."""
    loop = Loop(kernels, parallelism)
    t0 = time.thread_time()
    for block in blocks(path, block_bytes):
        loop.block(block)
    t1 = time.thread_time()
    loop.fire(2**63 - 1)  # the end of input fires every window
    loop.spent["fire"] += time.thread_time() - t1
    return loop, time.thread_time() - t0


def measure(kernels: Kernels, path: Path, block_bytes: int, check: bool) -> dict[str, Any]:
    loop, cpu_s = run(kernels, path, block_bytes)
    n = loop.events
    out: dict[str, Any] = {
        "kernels": kernels.name,
        "events": n,
        "ns_per_event": round(cpu_s / n * 1e9),
        "ns_per_event_without_fire": round((cpu_s - loop.spent["fire"]) / n * 1e9),
        "steps_ns_per_event": {s: round(v / n * 1e9, 1) for s, v in loop.spent.items()},
        "events_per_cpu_s": round(n / cpu_s),
        "late": loop.late,
        "fallback_lines": loop.fallbacks,
        "keys": len(loop.interner),
    }
    if check:
        out["equals_reference"] = loop.results() == reference(path)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--kernels", default="compiled")
    parser.add_argument("--block-bytes", type=int, default=1 << 20)
    parser.add_argument("--runs", type=int, default=3, help="the median of this many is kept")
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "weir-hotpath"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    kernels = load(args.kernels)
    report = {}
    for keys in args.keys:
        path = event_file("peer", args.events, args.workdir, keys)
        runs = [measure(kernels, path, args.block_bytes, check=i == 0) for i in range(args.runs)]
        runs.sort(key=lambda r: r["ns_per_event"])
        median = runs[len(runs) // 2]
        median["equals_reference"] = runs[0].get("equals_reference", False) or any(
            r.get("equals_reference") for r in runs
        )
        median["ns_per_event_runs"] = [r["ns_per_event"] for r in runs]
        report[f"{keys}_keys"] = median
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
