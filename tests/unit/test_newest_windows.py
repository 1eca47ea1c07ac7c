"""A point lookup that wants a key's newest ``limit`` windows reads from a few windows below
the watermark (``cellkeys.newest_windows``) and answers exactly what reading every window
answers; a key with fewer windows there is read in full. Real RocksDB files, fine and coarse
cells, several generations a window."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from weir import Job, agg, sources, windows
from weir.api import cellkeys
from weir.engine.nodes import WindowNode
from weir.state import cells
from weir.state.keygroups import key_group
from weir.state.rocksdb import RocksState, SecondaryReader

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
