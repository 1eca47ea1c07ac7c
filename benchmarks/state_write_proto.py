"""Prototype of the state writes phase 2 needs (issue 38, item 4), measured, not wired in: a
fired or flushed window's changed rows, as the fold exports them (columns), written to RocksDB
(rocksdict, raw mode, on real files) in two layouts, and a point lookup from each.

    python -m benchmarks.state_write_proto [--rows N ...] [--max-parallelism M]

- ``rows``: today's layout, one RocksDB entry per (key, window): ``state/layout.py``'s key and a
  msgpack value, one ``WriteBatch.put`` per row (rocksdict 0.3.29 has no bulk put and no
  ``WriteBatch`` from bytes), prefixes cached as ``KeyPrefixes`` caches them;
- ``chunks``: one entry per (key group, window) per flush holding only the changed rows, as
  columns (sorted key bytes with their offsets, then the count and sum arrays), grouped with
  numpy: one ``put`` per key group, never one per row; a lookup reads the key group's chunk and
  binary-searches it (a real layout also merges a key group's chunks in the background, so a
  lookup reads one base chunk plus the few deltas since).

Prints JSON: CPU ns per changed row for each write (``time.thread_time``; RocksDB's insert holds
the GIL, so it is in the figure), and CPU µs per point lookup (a random existing key).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from rocksdict import AccessType, Options, Rdict, WriteBatch

from weir.state import layout

STATE_ID = 1
END = 1_700_000_010_000
CHUNK_TAG = 0xFFFF  # a state id no operator has: the chunks' own key space


def _open(path: Path) -> Rdict:
    return Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_write())


def rows_layout(db: Rdict, keys: list[bytes], groups: list[int], counts: Any, sums: Any) -> float:
    prefixes = layout.key_prefixes(groups, STATE_ID, keys)  # cached per key in the engine
    ns = layout.encode_namespace(END)
    counts_l, sums_l = counts.tolist(), sums.tolist()
    pack = msgpack.Packer().pack
    t0 = time.thread_time()
    wb = WriteBatch(raw_mode=True)
    put = wb.put
    for p, c, s in zip(prefixes, counts_l, sums_l, strict=True):
        put(p + ns, pack([c, s]))
    db.write(wb)
    return time.thread_time() - t0


def _chunk_key(kg: int, seq: int) -> bytes:
    return struct.pack(">HHq", kg, CHUNK_TAG, END) + struct.pack(">q", seq)


def chunks_layout(db: Rdict, keyarr: Any, groups: Any, counts: Any, sums: Any) -> float:
    """One value per key group: ``n | width | lengths (int32, n) | keys padded to width |
    counts | sums``, the keys sorted (numpy's fixed-width bytes: no Python object per key)."""
    t0 = time.thread_time()
    order = np.lexsort((keyarr, groups))  # by key group, then key bytes
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    lens_all = np.char.str_len(keyarr).astype(np.int32)
    width = keyarr.dtype.itemsize
    wb = WriteBatch(raw_mode=True)
    for part in np.split(order, bounds):
        value = b"".join(
            (struct.pack("<ii", len(part), width), lens_all[part].tobytes(),
             keyarr[part].tobytes(), counts[part].tobytes(), sums[part].tobytes())
        )  # fmt: skip
        wb.put(_chunk_key(int(groups[part[0]]), 0), value)
    db.write(wb)
    return time.thread_time() - t0


def chunk_lookup(db: Rdict, key: bytes, max_par: int) -> tuple[int, float] | None:
    raw = db.get(_chunk_key(zlib.crc32(key) % max_par, 0))
    if raw is None:
        return None
    n, width = struct.unpack_from("<ii", raw)
    lens = np.frombuffer(raw, np.int32, n, 8)
    base = 8 + 4 * n

    def at(i: int) -> bytes:
        found: bytes = raw[base + i * width : base + i * width + int(lens[i])]
        return found

    lo, hi = 0, n
    while lo < hi:  # binary search over the sorted key bytes
        mid = (lo + hi) // 2
        if at(mid) < key:
            lo = mid + 1
        else:
            hi = mid
    if lo == n or at(lo) != key:
        return None
    tail = base + n * width
    count = int(np.frombuffer(raw, np.int64, 1, tail + 8 * lo)[0])
    total = float(np.frombuffer(raw, np.float64, 1, tail + 8 * n + 8 * lo)[0])
    return count, total


def measure(n: int, max_par: int, workdir: Path) -> dict[str, Any]:
    keys = [f"ad-{i}".encode() for i in range(n)]
    groups = [zlib.crc32(k) % max_par for k in keys]
    counts = np.arange(1, n + 1, dtype=np.int64)
    sums = counts * 0.5
    keyarr = np.array(keys, dtype=f"S{max(map(len, keys))}")
    garr = np.array(groups, np.int32)
    out: dict[str, Any] = {"rows": n}
    dbs = {}
    for name in ("rows", "chunks"):
        path = workdir / name
        shutil.rmtree(path, ignore_errors=True)
        dbs[name] = db = _open(path)
        if name == "rows":
            cpu = rows_layout(db, keys, groups, counts, sums)
        else:
            cpu = chunks_layout(db, keyarr, garr, counts, sums)
        out[f"{name}_write_ns_per_row"] = round(cpu / n * 1e9)
    sample = random.Random(7).sample(range(n), min(n, 2_000))
    ns = layout.encode_namespace(END)
    t0 = time.thread_time()
    for i in sample:
        raw = dbs["rows"].get(layout.key_prefix(groups[i], STATE_ID, keys[i]) + ns)
        assert msgpack.unpackb(raw) == [i + 1, (i + 1) * 0.5]
    out["rows_lookup_us"] = round((time.thread_time() - t0) / len(sample) * 1e6, 2)
    t0 = time.thread_time()
    for i in sample:
        assert chunk_lookup(dbs["chunks"], keys[i], max_par) == (i + 1, (i + 1) * 0.5)
    out["chunks_lookup_us"] = round((time.thread_time() - t0) / len(sample) * 1e6, 2)
    for db in dbs.values():
        db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--max-parallelism", type=int, default=128)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="weir-state-proto-"))
    try:
        print(json.dumps([measure(n, args.max_parallelism, workdir) for n in args.rows], indent=2))
    finally:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
