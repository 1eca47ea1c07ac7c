"""State format 1 (every window a row) restored into format 2 (windows as cells): a checkpoint
written the old way is migrated on restore, and the operator goes on as if never stopped.

The old state is made by a frozen copy of format 1's encoder (``_v1_key``, ``msgpack``), as the
release before cells wrote it, from what the operator stores now: its window cells become rows,
its timers (the same in both formats) stay, and ``_metadata`` says no ``state_format``. RocksDB
on real files.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest

from tests.support.reference import group_emissions
from tests.unit.test_operator_restore import _batches, _feed, _finish, _runtime
from weir import windows
from weir.base.errors import StateError
from weir.engine.runtime.task.restore import restore_operators
from weir.state import cellcodec, cells, layout
from weir.state.keygroups import range_for_operator
from weir.state.rocksdb import RocksState

ASSIGNERS = {
    "tumbling": windows.tumbling(ms=100),
    "sliding": windows.sliding(size_ms=100, slide_ms=30),
}


def _v1_key(kg: int, sid: int, key: bytes, end: int) -> bytes:
    """Format 1's state key, frozen: kg | state id | key length | key | end, offset-binary."""
    return struct.pack(">HHH", kg, sid, len(key)) + key + struct.pack(">Q", end + (1 << 63))


def _to_format_1(state: RocksState, sids: list[int]) -> int:
    """Rewrite every window cell of ``sids`` as format 1's rows; returns the rows written."""
    rows: dict[bytes, bytes] = {}
    gone: list[bytes] = []
    for kg in range_for_operator(128, 1, 0):
        for sid in sids:
            prefix = layout.state_prefix(kg, sid)
            by_cell: dict[bytes, list[bytes]] = {}
            for ckey, raw in state.scan(prefix, layout.prefix_upper_bound(prefix)):
                by_cell.setdefault(ckey[:14], []).append(raw)
                gone.append(ckey)
            for at, gens in by_cell.items():
                for key, slots in cells.decode_rows(gens):
                    rows[_v1_key(kg, sid, key, cells.cell_end(at))] = msgpack.packb(slots)
    state.write(rows, gone)
    state.write({}, [layout.FORMAT_KEY])
    return len(rows)


def _uninterrupted(assigner: Any, batches: list[Any], path: Path) -> list[Any]:
    """What the operator emits over every batch without a stop."""
    state = RocksState(path)
    whole = _runtime(assigner, state)
    _feed(whole, batches, -1)
    want = whole.drain() + _finish(whole)
    state.close()
    return want


def _meta(wm: int) -> dict[str, Any]:
    """A format-1 ``_metadata`` as far as operators read it (no ``state_format``)."""
    marks = {"watermark": wm, "data_watermark": wm}
    return {"max_parallelism": 128, "workers": [{"operators": {"op": marks}}]}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_a_format_1_checkpoint_restores_into_cells_and_goes_on(
    tmp_path: Path, kind: str, seed: int
) -> None:
    assigner, batches = ASSIGNERS[kind], _batches(seed)
    want = _uninterrupted(assigner, batches, tmp_path / "whole")

    state = RocksState(tmp_path / "old")
    first = _runtime(assigner, state)
    wm = _feed(first, batches[:7], -1)
    got = first.drain()
    first.flush()
    sids = [first.op.state_id, first.op.state_id | 0x4000]
    assert _to_format_1(state, sids) > 0
    state.checkpoint(tmp_path / "chk")
    state.close()

    restored = RocksState(tmp_path / "chk")
    second = _runtime(assigner, restored)
    restore_operators(_meta(wm), {"op": second}, restored)
    for kg in range_for_operator(128, 1, 0):  # no row of format 1 is left
        for sid in sids:
            prefix = layout.state_prefix(kg, sid)
            for k, _ in restored.scan(prefix, layout.prefix_upper_bound(prefix)):
                assert len(k) == cells.CELL_KEY_BYTES
    assert restored.get(layout.FORMAT_KEY) == str(layout.STATE_FORMAT).encode()
    _feed(second, batches[7:], wm)
    got += second.drain() + _finish(second)
    restored.close()
    assert group_emissions(got) == group_emissions(want)


def test_a_checkpoint_of_a_newer_format_is_refused_with_the_way_out() -> None:
    with pytest.raises(StateError, match="state format 4 is not one this weir reads"):
        layout.format_of({"state_format": 4})
    assert layout.format_of({}) == 1
    assert layout.format_of({"state_format": 2}) == layout.CELLS_FORMAT == 2
    assert layout.format_of({"state_format": 3}) == layout.STATE_FORMAT == 3


@pytest.mark.parametrize("kind", list(ASSIGNERS))
def test_a_format_2_checkpoint_restores_as_it_is_and_goes_on_in_coarse_cells(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 2 wrote fine cells only; format 3 reads them as they are (no migration) and
    writes its sparse generations in coarse cells beside them: the results are the
    uninterrupted run's."""
    assigner, batches = ASSIGNERS[kind], _batches(3)
    want = _uninterrupted(assigner, batches, tmp_path / "whole")

    state = RocksState(tmp_path / "old")
    monkeypatch.setattr(cellcodec, "COARSE_ROWS", 0)  # fine cells only, as format 2 wrote
    first = _runtime(assigner, state)
    wm = _feed(first, batches[:7], -1)
    got = first.drain()
    first.flush()
    state.checkpoint(tmp_path / "chk")
    state.close()
    monkeypatch.undo()

    restored = RocksState(tmp_path / "chk")
    before = dict(restored.scan(b"", b"\xff\xfe"))
    fine = [k for k in before if len(k) == cells.CELL_KEY_BYTES]  # (and the cleanup timers)
    assert fine and not any(cells.is_coarse(cells.decode_cell_key(k)[2]) for k in fine)
    second = _runtime(assigner, restored)
    restore_operators({**_meta(wm), "state_format": 2}, {"op": second}, restored)
    assert {k: v for k, v in restored.scan(b"", b"\xff\xfe") if k in before} == before
    _feed(second, batches[7:], wm)
    second.flush()
    after = [k for k, _ in restored.scan(b"", b"\xff\xfe") if len(k) == cells.CELL_KEY_BYTES]
    assert any(cells.is_coarse(cells.decode_cell_key(k)[2]) for k in after)
    got += second.drain() + _finish(second)
    restored.close()
    assert group_emissions(got) == group_emissions(want)
