"""How the API reads a key's or a window's cells, on real RocksDB files with fine and coarse
cells of several generations a window. A point lookup that wants a key's newest ``limit``
windows reads from a few windows below the watermark (``cellkeys.newest_windows``) and answers
exactly what reading every window answers; a key with fewer windows there is read in full. A
window listing reads each coarse cell once, not once for each of its buckets."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from weir import Job, agg, sources, windows
from weir.api import cellkeys
from weir.engine.nodes import WindowNode
from weir.state import cellcodec, cells
from weir.state.keygroups import key_group
from weir.state.rocksdb import RocksState
from weir.state.secondary import SecondaryReader

SIZE = 10_000
MAX_PAR = 16
ENDS = [SIZE * i for i in range(1, 21)]  # twenty windows, as retention keeps fired ones


def _op(tmp_path: Path) -> WindowNode:
    job = Job("j", max_parallelism=MAX_PAR)
    (
        job.source(sources.jsonl(tmp_path / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=SIZE))
        .aggregate("op", n=agg.count())
    )
    op = job.operators["op"]
    assert isinstance(op, WindowNode)
    return op


def _write(state: RocksState, op: WindowNode, rng: random.Random) -> list[str]:
    """Keys ``k0``..``k59``: hot ones in every window, sparse ones in a few old windows only;
    each window in one to three generations, coarse or fine at random."""
    keys = [f"k{i}" for i in range(60)]
    gen = 0
    for end in ENDS:
        for _ in range(rng.randint(1, 3)):
            gen += 1
            old = end <= 60_000
            chosen = [k for i, k in enumerate(keys) if i < 20 or (old and rng.random() < 0.3)]
            chosen = [k for k in chosen if rng.random() < 0.8 or int(k[1:]) < 5]
            raw = [k.encode() for k in chosen]
            groups = np.array([key_group(k, MAX_PAR) for k in chosen], np.uint16)
            counts = np.array([rng.randint(1, 100) for _ in chosen], np.int64)
            rows = cells.CellRows(raw, groups, [counts])
            coarse = rng.random() < 0.5
            state.write(dict(cells.encode_cells(rows, op.state_id, end, gen, coarse)))
    return keys


@pytest.mark.fast
def test_the_newest_windows_are_those_a_full_read_finds(tmp_path: Path) -> None:
    op = _op(tmp_path)
    state = RocksState(tmp_path / "db")
    keys = _write(state, op, random.Random(7))
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    read: list[int] = []

    def ranges(kg: int, wanted: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
        found = reader.scan_ranges(wanted)
        read.append(sum(map(len, found)))
        return found

    narrowed = 0
    try:
        for key in keys:
            kg = key_group(key, MAX_PAR)
            read.clear()
            every, _ = cellkeys.key_cells(ranges, kg, op, key.encode())
            full_cost = sum(read)
            for count in (1, 3, 5, 30):
                for wm in (ENDS[-1], ENDS[-1] - 3 * SIZE, ENDS[5], -(2**63)):
                    read.clear()
                    newest = cellkeys.Newest(count, wm)
                    got, panes = cellkeys.key_cells(ranges, kg, op, key.encode(), newest)
                    assert panes == {}
                    want = sorted(every.items())[-count:]
                    assert sorted(got.items())[-count:] == want, (key, count, wm)
                    if len(read) == 1:  # answered from the newest windows alone
                        narrowed += 1
                        assert sum(read) <= full_cost
    finally:
        reader.close()
        state.close()
    # the hot keys' newest windows are below the watermark: most lookups read only those
    assert narrowed >= 20 * 4


@pytest.mark.fast
def test_a_key_with_no_cell_at_all_is_an_empty_answer(tmp_path: Path) -> None:
    op = _op(tmp_path)
    state = RocksState(tmp_path / "db")
    _write(state, op, random.Random(3))
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:

        def ranges(kg: int, wanted: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
            return reader.scan_ranges(wanted)

        got = cellkeys.key_cells(
            ranges, key_group("nobody", MAX_PAR), op, b"nobody", cellkeys.Newest(5, ENDS[-1])
        )
        assert got == ({}, {})
    finally:
        reader.close()
        state.close()


@pytest.mark.fast
def test_a_window_listing_reads_each_coarse_cell_once_and_lists_every_key(
    tmp_path: Path,
) -> None:
    """A coarse cell holds eight buckets' keys; a window listing visits the buckets in turn and
    reads it for the first of them only (and counts only what it read)."""
    op = _op(tmp_path)
    state = RocksState(tmp_path / "db")
    keys = [f"key-{i}" for i in range(400)]
    raw = [k.encode() for k in keys]
    groups = np.array([key_group(k, MAX_PAR) for k in keys], np.uint16)
    rows = cells.CellRows(raw, groups, [np.arange(len(keys), dtype=np.int64)])
    state.write(dict(cells.encode_cells(rows, op.state_id, SIZE, 1, coarse=True)))
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    calls: list[bytes] = []

    def between(kg: int, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        calls.append(lo)
        return reader.scan(lo, hi)

    def window(kg: int, bucket: int, read: cellkeys.Between) -> dict[bytes, list[int]]:
        return cellkeys.window_cells(read, kg, op.state_id, bucket, [SIZE]).get(SIZE, {})

    try:
        start = cellkeys.CellPosition(0, 0, None)
        page = cellkeys.list_window(between, MAX_PAR, start, 10_000, window, budget=10**6)
    finally:
        reader.close()
        state.close()
    assert page.next is None
    assert sorted((k.decode(), slots[0]) for _, k, slots in page.found) == sorted(
        (k, i) for i, k in enumerate(keys)
    )
    coarse_reads = [lo for lo in calls if cellcodec.is_coarse(int.from_bytes(lo[4:6]))]
    visited = {(lo[:2], lo[4:6]) for lo in coarse_reads}
    assert len(coarse_reads) == len(visited) == MAX_PAR * cells.BUCKETS >> cells.COARSE_SHIFT
    # the budget counts each bucket visited and each entry read: one a coarse cell with keys
    holding = {(kg, cells.coarse_of(cells.bucket_of(k))) for kg, k in zip(groups, raw, strict=True)}
    assert page.examined == MAX_PAR * cells.BUCKETS + len(holding)
