"""State layouts side by side on real RocksDB files (issue 38 item 4,
docs/decisions/0010-state-writes.md).

    python -m benchmarks.state_layout_bench [--keys N ...] [--windows W ...] [--buckets B ...]

- **write**: one generation of N changed (key, window) rows, as today's operators write it
  (a row per entry: ``layout.key_prefix`` + namespace, msgpack slots, one ``WriteBatch.put``
  each) and as cells (``state/cells.py``: one entry per (key group, bucket, window), built with
  numpy). Thread CPU per row, split for rows into the Python puts and RocksDB's ``write``, which
  is what a binding of our own to RocksDB's C API could and could not save.
- **lookup**: a key's windows read as the API reads them (a prefix scan with an upper bound,
  then each window decoded), with W windows of K keys stored, for rows and for cells (the
  bucket's prefix scan, a binary search in each cell). Thread CPU per lookup, random keys.

Prints JSON. CPU time (``time.thread_time``), so other processes on the machine change little.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from rocksdict import Options, Rdict, ReadOptions, WriteBatch

from weir.engine.kernels import load
from weir.state import cellcodec, cells, layout

SID = 7
MAX_PAR = 128
END0 = 1_700_000_000_000
STEP = 10_000


def _open(path: Path) -> Rdict:
    shutil.rmtree(path, ignore_errors=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    return Rdict(str(path), opts)


def _scan(db: Rdict, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
    opts = ReadOptions()
    opts.set_iterate_upper_bound(hi)
    it = db.iter(opts)
    it.seek(lo)
    out = []
    while it.valid():
        out.append((it.key(), it.value()))
        it.next()
    return out


def _data(n: int) -> tuple[list[bytes], np.ndarray, list[Any]]:
    keys = [f"ad-{i}".encode() for i in range(n)]
    groups = np.array([zlib.crc32(k) % MAX_PAR for k in keys], np.uint16)
    counts = np.arange(1, n + 1, dtype=np.int64)
    return keys, groups, [counts, counts * 0.5]


def write_rows(
    db: Rdict, keys: list[bytes], groups: np.ndarray, slots: list[Any], end: int
) -> tuple[float, float]:
    """(python puts, RocksDB write) CPU seconds of today's row layout."""
    prefixes = layout.key_prefixes(groups.tolist(), SID, keys)  # cached per key in the engine
    ns = layout.encode_namespace(end)
    flat = list(zip(*(s.tolist() for s in slots), strict=True))
    pack = msgpack.Packer().pack
    t0 = time.thread_time()
    order = sorted(range(len(keys)), key=prefixes.__getitem__)
    wb = WriteBatch(raw_mode=True)
    put = wb.put
    for i in order:
        put(prefixes[i] + ns, pack(flat[i]))
    t1 = time.thread_time()
    db.write(wb)
    return t1 - t0, time.thread_time() - t1


def write_cells(
    db: Rdict, keys: list[bytes], groups: np.ndarray, slots: list[Any], end: int
) -> tuple[float, float, int]:
    t0 = time.thread_time()
    entries = cells.encode_cells(cells.CellRows(keys, groups, slots), SID, end, 1)
    wb = WriteBatch(raw_mode=True)
    put = wb.put
    for k, v in entries:
        put(k, v)
    t1 = time.thread_time()
    db.write(wb)
    return t1 - t0, time.thread_time() - t1, len(entries)


_FIND = load("compiled").find_windows


def lookup_rows(db: Rdict, key: bytes) -> int:
    kg = zlib.crc32(key) % MAX_PAR
    prefix = layout.key_prefix(kg, SID, key)
    rows = _scan(db, prefix, layout.prefix_upper_bound(prefix))
    return len([msgpack.unpackb(v) for _, v in rows])


def lookup_cells(db: Rdict, key: bytes) -> int:
    """As the API reads a key: its bucket's prefix scans (fine and coarse cells), then
    ``cells.key_windows`` with the compiled lookup kernel (``find_windows``)."""
    kg = zlib.crc32(key) % MAX_PAR
    entries = cells.key_entries(lambda lo, hi: _scan(db, lo, hi), kg, SID, key)
    return len(cells.key_windows(entries, key, _FIND))


def lookup_cells_python(db: Rdict, key: bytes) -> int:
    """``lookup_cells`` with the kernel's pure-Python twin."""
    kg = zlib.crc32(key) % MAX_PAR
    entries = cells.key_entries(lambda lo, hi: _scan(db, lo, hi), kg, SID, key)
    return len(cells.key_windows(entries, key))


def measure_writes(n: int, workdir: Path) -> dict[str, Any]:
    keys, groups, slots = _data(n)
    out: dict[str, Any] = {"rows": n, "buckets_per_key_group": cells.BUCKETS}
    db = _open(workdir / "w-rows")
    py, rdb = write_rows(db, keys, groups, slots, END0)
    db.close()
    out["rows_python_ns_per_row"] = round(py / n * 1e9)
    out["rows_rocksdb_write_ns_per_row"] = round(rdb / n * 1e9)
    db = _open(workdir / "w-cells")
    py, rdb, entries = write_cells(db, keys, groups, slots, END0)
    db.close()
    out["cells_entries"] = entries
    out["cells_python_ns_per_row"] = round(py / n * 1e9)
    out["cells_rocksdb_write_ns_per_row"] = round(rdb / n * 1e9)
    return out


def measure_lookups(n: int, windows: int, workdir: Path, samples: int = 2_000) -> dict[str, Any]:
    keys, groups, slots = _data(n)
    rows_db, cells_db = _open(workdir / "l-rows"), _open(workdir / "l-cells")
    for w in range(windows):
        write_rows(rows_db, keys, groups, slots, END0 + w * STEP)
        write_cells(cells_db, keys, groups, slots, END0 + w * STEP)
    rows_db.flush()
    cells_db.flush()
    sample = [keys[i] for i in random.Random(7).sample(range(n), min(n, samples))]
    out: dict[str, Any] = {"keys": n, "windows": windows, "buckets_per_key_group": cells.BUCKETS}
    runs = (
        ("rows", rows_db, lookup_rows),
        ("cells_python", cells_db, lookup_cells_python),
        ("cells", cells_db, lookup_cells),
    )
    for name, db, fn in runs:
        for k in sample[:50]:  # warm the block cache as a serving process's would be
            fn(db, k)
        t0 = time.thread_time()
        for k in sample:
            assert fn(db, k) == windows
        out[f"{name}_lookup_us"] = round((time.thread_time() - t0) / len(sample) * 1e6, 1)
    rows_db.close()
    cells_db.close()
    return out


def measure_generation(n: int, workdir: Path, rounds: int = 3) -> dict[str, Any]:
    """A flush's generation of ``n`` changed rows written by the worker's state writer, today's
    way (``StateDelta.segments``: a row a key) and as cells (``StateDelta.cells``), on fresh
    ``RocksState`` instances, interleaved rounds, median thread CPU per row."""
    from statistics import median

    from weir.engine.runtime.operators.cellwrites import CellLog, CellPart
    from weir.engine.runtime.operators.delta import StateDelta
    from weir.engine.runtime.operators.statekeys import KeyPrefixes
    from weir.engine.runtime.task.statewriter import WRITE_CHUNK
    from weir.state.rocksdb import RocksState

    keys = [f"ad-{i}" for i in range(n)]
    flat = [v for i in range(n) for v in (i + 1, (i + 1) * 0.5)]
    prefixes = KeyPrefixes(SID, MAX_PAR)
    prefixes.warm(keys)  # the operator makes new keys' prefixes at the flush, on its loop
    ns = layout.encode_namespace(END0)
    cpu: dict[str, list[float]] = {"rows": [], "cells": []}
    for r in range(rounds):
        for name in ("rows", "cells"):
            path = workdir / f"g-{name}-{r}"
            shutil.rmtree(path, ignore_errors=True)
            state = RocksState(path)
            if name == "rows":
                delta = StateDelta(segments=[(ns, keys, flat)], prefix=prefixes.prefix, width=2)
            else:
                part = CellPart(CellLog(MAX_PAR), SID, 2, [(SID, END0, keys, flat)])
                delta = StateDelta(cells=part)
            t0 = time.thread_time()
            delta.write(state, WRITE_CHUNK)
            cpu[name].append(time.thread_time() - t0)
            state.close()
            shutil.rmtree(path, ignore_errors=True)
    return {
        "rows": n,
        "buckets_per_key_group": cellcodec.BUCKETS,
        "today_rows_ns_per_row": round(median(cpu["rows"]) / n * 1e9),
        "cells_ns_per_row": round(median(cpu["cells"]) / n * 1e9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-rows", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument(
        "--lookups",
        nargs="+",
        default=["10000x1", "10000x10", "10000x360", "100000x1", "100000x10"],
        help="KEYSxWINDOWS",
    )
    parser.add_argument("--buckets", type=int, nargs="+", default=[cells.BUCKETS])
    parser.add_argument("--generation", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="weir-layout-bench-"))
    results: dict[str, Any] = {"writes": [], "lookups": [], "generations": []}
    try:
        for b in args.buckets:
            cellcodec.BUCKETS, cellcodec._BUCKET_MASK = (
                b,
                b - 1,
            )  # the format's constant, varied here
            results["writes"].extend(measure_writes(n, workdir) for n in args.write_rows)
            for n in args.generation:
                results["generations"].append(measure_generation(n, workdir))
                print(json.dumps(results["generations"][-1]), flush=True)
            for spec in args.lookups:
                k, w = (int(x) for x in spec.split("x"))
                results["lookups"].append(measure_lookups(k, w, workdir))
                print(json.dumps(results["lookups"][-1]), flush=True)
    finally:
        shutil.rmtree(workdir)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
