"""RocksDB's side of a worker's state writes at 1M ids, per memtable configuration
(docs/decisions/0017-memtables.md).

    python -m benchmarks.memtable_bench [--keys N] [--windows W] [--rounds R] [--configs ...]

Builds the cells a 1M-id tumbling window job writes (each window's ~90k changed keys in two
generations, as a flush in the middle of a window and its firing write them: ``encode_packed``,
the compiled kernel), then, in a fresh process per configuration and round (interleaved), writes
them through ``RocksState.write`` in the state writer's chunks and reports, in CPU seconds:
``write`` (the writing thread: the Python puts and RocksDB's ``write``), ``rocksdb`` (RocksDB's
own threads: flushes and compactions), the SST bytes, and µs per point lookup (``get`` of a
stored cell) and per bucket scan (``scan``: a key's windows, as a lookup reads them) on the
primary before its last flush. Prints JSON: each configuration's medians.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from weir.engine.kernels import load
from weir.engine.runtime.task.statewriter import WRITE_CHUNK
from weir.state import cellcodec, layout
from weir.state.rocksdb import RocksState
from weir.state.rocksopts import RocksOptions

SID = 7
MAX_PAR = 128
END0 = 1_700_000_000_000
STEP = 10_000
# name -> RocksOptions fields; "one-64" is one 64 MiB memtable and Snappy, as before decision 0017
CONFIGS: dict[str, dict[str, Any]] = {
    "one-64": {
        "write_buffer_mb": 64,
        "memtables_per_flush": 1,
        "memtable_bloom_ratio": 0.0,
        "compression": "snappy",
    },
    "8x8": {},
    "8x8-nobloom": {"memtable_bloom_ratio": 0.0},
    "8x8-snappy": {"compression": "snappy"},
    "4x16": {"write_buffer_mb": 4, "memtables_per_flush": 16},
}


def make_batches(keys: int, windows: int, seed: int = 0) -> list[list[tuple[bytes, bytes]]]:
    """The cells of ``windows`` windows, ``keys / 11`` changed keys each, two generations a
    window, in ``WRITE_CHUNK`` batches."""
    rng = np.random.default_rng(seed)
    encode = load().encode_packed
    names = [f"ad-{i}".encode() for i in range(keys)]
    entries: list[tuple[bytes, bytes]] = []
    gen = 1
    for w in range(windows):
        picked = rng.choice(keys, keys // 11, replace=False)
        for part in np.array_split(picked, 2):
            raw = [names[i] for i in part.tolist()]
            rows = cellcodec.CellRows(raw, np.zeros(0, np.uint16), [])
            packed = cellcodec.PackedRows.of(rows)
            count = rng.integers(1, 4, len(raw)).astype(np.int64)
            total = rng.integers(1, 100, len(raw)).astype(np.float64)
            packed = cellcodec.PackedRows(
                packed.blob,
                packed.offsets,
                packed.crc,
                (packed.crc % MAX_PAR).astype(np.uint16),
                [count, total],
            )
            entries.extend(encode(packed, SID, END0 + w * STEP, gen))
            gen += 1
    return [entries[i : i + WRITE_CHUNK] for i in range(0, len(entries), WRITE_CHUNK)]


def _rocksdb_cpu() -> float:
    """CPU seconds of this process's RocksDB threads (their names start with "rocksdb")."""
    total = 0.0
    for tid in os.listdir("/proc/self/task"):
        stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        if stat[stat.index("(") + 1 : stat.rindex(")")].startswith("rocksdb"):
            fields = stat.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_one(config: str, batches_file: Path, workdir: Path) -> dict[str, float]:
    """One configuration in this process: write, look up, flush; CPU and sizes."""
    batches: list[list[tuple[bytes, bytes]]] = pickle.loads(batches_file.read_bytes())
    state = RocksState(workdir / "db", RocksOptions(**CONFIGS[config]))
    cpu0 = time.thread_time()
    for batch in batches:
        state.write(dict(batch))
    write = time.thread_time() - cpu0
    sample = random.Random(1).sample([k for b in batches for k, _ in b], 5_000)
    cpu0 = time.thread_time()
    for k in sample:
        state.get(k)
    get = (time.thread_time() - cpu0) / len(sample) * 1e6
    cpu0 = time.thread_time()
    for k in sample:
        lo = k[:6]
        sum(1 for _ in state.scan(lo, layout.prefix_upper_bound(lo)))
    scan = (time.thread_time() - cpu0) / len(sample) * 1e6
    state.flush()
    state.close()
    sst = sum(f.stat().st_size for f in (workdir / "db").glob("*.sst"))
    return {
        "write": write,
        "rocksdb": _rocksdb_cpu(),
        "sst_mb": sst / 1e6,
        "get_us": get,
        "scan_us": scan,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # CONFIG BATCHES: a child run
    args = ap.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(run_one(args.one[0], Path(args.one[1]), Path(tmp))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        batches_file = Path(tmp) / "batches.pickle"
        batches_file.write_bytes(pickle.dumps(make_batches(args.keys, args.windows)))
        runs: dict[str, list[dict[str, float]]] = {c: [] for c in args.configs}
        for _ in range(args.rounds):
            for config in args.configs:
                cmd = [sys.executable, "-m", "benchmarks.memtable_bench", "--one", config]
                out = subprocess.run(
                    [*cmd, str(batches_file)], check=True, capture_output=True, timeout=600
                )
                runs[config].append(json.loads(out.stdout))
    medians = {
        c: {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
        for c, rs in runs.items()
    }
    print(json.dumps(medians, indent=1))


if __name__ == "__main__":
    main()
