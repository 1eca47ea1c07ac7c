"""Window cells (``state/cells.py``) against a dict model: any sequence of generations (changed
rows of any windows, slots of any type a fold or a user-defined aggregate holds), merges (a cell
past ``MAX_GENERATIONS`` entries) and dropped windows reads back, key by key and cell by cell,
as the model says, with each value's type kept (``1`` is not ``1.0``)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.runtime.operators.cellwrites import CellLog, CellPart
from weir.engine.runtime.operators.delta import ColumnSegment, StateDelta
from weir.state import cellcodec, cells, layout
from weir.state.memory import MemoryState

MAX_PAR = 4  # few key groups and buckets: cells of several rows, hash ties within a bucket
SID = 7
ENDS = st.sampled_from([-(2**63) + 10, -5, 100, 200, 2**63 - 1])
KEYS = st.one_of(
    st.sampled_from(["a", "b", "ad-1", "ad-10", "é", "ключ", "", "a\x00", "long" * 60]),
    st.text(max_size=6),
)
NUMBER = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**64 - 1),  # past int64: msgpack still holds it
    st.floats(allow_nan=False),
)
SLOT = st.one_of(NUMBER, st.lists(st.integers(0, 9), max_size=3), st.text(max_size=3))
ROWS = st.dictionaries(KEYS, st.tuples(SLOT, NUMBER), min_size=1, max_size=30)
STEP = st.one_of(
    st.tuples(st.just("write"), ENDS, ROWS, st.booleans(), st.booleans()),
    st.tuples(st.just("drop"), ENDS, st.just({}), st.just(False), st.just(False)),
)


def _segment(end: int, rows: dict[str, tuple[Any, Any]], as_columns: bool) -> Any:
    keys = list(rows)
    groups = np.array([zlib.crc32(k.encode()) % MAX_PAR for k in keys], np.uint16)
    slots = [cells.slot_column([rows[k][j] for k in keys]) for j in range(2)]
    if as_columns:
        return ColumnSegment.of(end, keys, groups, slots)
    return (SID, end, keys, [v for k in keys for v in rows[k]])


def _read(state: MemoryState, keys: set[str]) -> dict[tuple[int, str], list[Any]]:
    """Every (end, key) the cells hold, read as a point lookup reads them."""
    out: dict[tuple[int, str], list[Any]] = {}
    for key in keys:
        raw = key.encode()
        kg = zlib.crc32(raw) % MAX_PAR
        entries = cells.key_entries(state.scan, kg, SID, raw)
        for end, slots in cells.key_windows(entries, raw).items():
            out[(end, key)] = slots
    return out


def _whole(state: MemoryState) -> dict[tuple[int, str], list[Any]]:
    """Every row, read a key group at a time (all generations of fine and coarse cells
    merged), as a restore reads them."""
    by_group: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for k, v in state.scan(b"", b"\xff"):
        by_group.setdefault(k[:4], []).append((k, v))
    return {
        (end, key.decode()): slots
        for entries in by_group.values()
        for end, rows in cells.windows_of(entries)
        for key, slots in rows
    }


def _same(a: dict[tuple[int, str], list[Any]], b: dict[tuple[int, str], list[Any]]) -> bool:
    return a.keys() == b.keys() and all(
        [(type(x), x) for x in a[k]] == [(type(y), y) for y in b[k]] for k in a
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=25))
def test_generations_merges_and_drops_read_back_as_the_model(steps: list[Any]) -> None:
    """Generations of one window in fine and coarse cells alike (a sparse flush, then a dense
    one, or back): a newer generation's row wins, whichever cells hold them."""
    state = MemoryState()
    log = CellLog(MAX_PAR)
    model: dict[tuple[int, str], list[Any]] = {}
    seen: set[str] = set()
    for kind, end, rows, as_columns, coarse in steps:
        with pytest.MonkeyPatch.context() as grain:
            grain.setattr(cellcodec, "COARSE_ROWS", 10**9 if coarse else 0)
            _step(state, log, model, seen, kind, end, rows, as_columns)
    assert _same(_read(state, seen), model)
    assert _same(_whole(state), model)
    for at in {k[:14] for k, _ in state.scan(b"", b"\xff")}:  # merged: few entries a cell
        assert len(list(state.scan(at, layout.prefix_upper_bound(at)))) <= 5


def _step(
    state: MemoryState,
    log: CellLog,
    model: dict[tuple[int, str], list[Any]],
    seen: set[str],
    kind: str,
    end: int,
    rows: dict[str, tuple[Any, Any]],
    as_columns: bool,
) -> None:
    """One write or drop of the test above, applied to the state and the model."""
    if kind == "drop":
        keys = [k for (e, k) in model if e == end]
        part = CellPart(log, SID, 2, [], [(SID, end, keys)])
        for k in keys:
            del model[(end, k)]
        StateDelta(cells=part).write(state)
        return
    seg = _segment(end, rows, as_columns)
    part = CellPart(log, SID, 2, [] if as_columns else [seg])
    StateDelta(columns=[seg] if as_columns else [], cells=part).write(state, chunk=7)
    for k, (a, b) in rows.items():
        model[(end, k)] = [a, b]
    seen.update(rows)


@settings(max_examples=200, deadline=None)
@given(ROWS)
def test_a_cell_finds_each_of_its_keys_and_no_other(rows: dict[str, tuple[Any, Any]]) -> None:
    keys = [k.encode() for k in rows]
    slots = [cells.slot_column([rows[k][j] for k in rows]) for j in range(2)]
    cell = cells.Cell(cells.encode_cell(keys, slots))
    for key, (a, b) in zip(keys, rows.values(), strict=True):
        i = cell.find(key)
        assert i >= 0 and cell.key(i) == key
        assert [(type(x), x) for x in cell.slots_at(i)] == [(type(a), a), (type(b), b)]
    assert cell.find(b"\xff-not-a-key") == -1
    assert sorted(cell.keys()) == sorted(keys)


def test_due_merges_are_written_together_a_chunk_at_a_time() -> None:
    """Thousands of cells fall due at once at 10k keys (every flush touches every cell): they
    are merged in one pass and written ``chunk`` cells a batch, not one write a cell."""
    state = MemoryState()
    log = CellLog(MAX_PAR)
    model: dict[tuple[int, str], list[Any]] = {}
    keys = [f"id-{i}" for i in range(64)]
    for g in range(6):  # six generations of every cell: each is past MAX_GENERATIONS
        rows = {k: (g * 100 + i, float(g)) for i, k in enumerate(keys)}
        seg = _segment(100, rows, as_columns=True)
        StateDelta(columns=[seg], cells=CellPart(log, SID, 2, [])).write(state)
        model.update({(100, k): [a, b] for k, (a, b) in rows.items()})
    cells_held = {k[:14] for k, _ in state.scan(b"", b"\xff")}
    writes: list[int] = []
    write = state.write

    def counted(puts: Any, deletes: Any = None) -> None:
        writes.append(len(puts))
        write(puts, deletes)

    state.write = counted  # type: ignore[method-assign]
    log._cells[(SID, 100)].update(dict.fromkeys(cells_held, 5))  # one more due merge each
    merged = log.merge_due(state, chunk=3)
    assert merged == len(cells_held) > 3
    assert writes == [3] * (merged // 3) + ([merged % 3] if merged % 3 else [])
    assert _same(_whole(state), model)
    for at in cells_held:
        assert len(list(state.scan(at, layout.prefix_upper_bound(at)))) == 1
