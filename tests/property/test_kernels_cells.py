"""The cell lookup kernel (``find_windows``, compiled and its twin): a key's rows in its
bucket's cells, each window's newest generation holding the key winning, every slot with its
type (``1`` is not ``1.0``; an int past int64 and lists stay msgpack), against a dict model.
A cell cut short answers as the Python path does, in either implementation."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.kernels import Kernels
from weir.state import cells, layout

SID = 3
KEYS = st.one_of(st.sampled_from(["a", "b", "é", "", "a\x00", "long" * 40]), st.text(max_size=5))
NUMBER = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.integers(2**63, 2**64 - 1)
)
SLOT = st.one_of(NUMBER, st.lists(st.integers(0, 9), max_size=2))
WIDTH = st.integers(0, 3)
# (window end, generation's rows): generations in the order written
GENS = st.lists(
    st.tuples(
        st.sampled_from([-7, 100, 2**62]), st.dictionaries(KEYS, st.lists(SLOT), max_size=12)
    ),
    min_size=1,
    max_size=8,
)


def _typed(slots: list[Any]) -> list[tuple[type, Any]]:
    return [(type(x), x) for x in slots]


def _entries(gens: list[tuple[int, dict[str, list[Any]]]], width: int) -> list[tuple[bytes, bytes]]:
    """Every generation as one cell of its window (one bucket), in key order."""
    out = []
    for gen, (end, rows) in enumerate(gens):
        if not rows:
            continue
        keys = [k.encode() for k in rows]
        slots = [
            cells.slot_column([(rows[k] + [0] * width)[j] for k in rows]) for j in range(width)
        ]
        out.append((cells.cell_key(0, SID, 0, end, gen), cells.encode_cell(keys, slots)))
    return sorted(out)


@settings(max_examples=200, deadline=None)
@given(GENS, WIDTH, KEYS)
def test_find_windows_answers_as_the_model(
    kernels: Kernels, gens: list[tuple[int, dict[str, list[Any]]]], width: int, probe: str
) -> None:
    entries = _entries(gens, width)
    model: dict[tuple[int, str], list[Any]] = {}
    for end, rows in gens:
        for k, v in rows.items():
            model[(end, k)] = cells.Cell(
                cells.encode_cell(
                    [k.encode()], [cells.slot_column([(v + [0] * width)[j]]) for j in range(width)]
                )
            ).slots_at(0)
    for key in {k for _, k in model} | {probe}:
        raw = key.encode()
        got = kernels.find_windows(entries, raw, zlib.crc32(raw))
        want = {e: s for (e, k), s in model.items() if k == key}
        assert {layout.decode_namespace(ns): _typed(s) for ns, s in got.items()} == {
            e: _typed(s) for e, s in want.items()
        }
        assert got == cells.find_windows(entries, raw, zlib.crc32(raw))


def test_a_cell_cut_short_is_refused_as_the_python_path_refuses_it(kernels: Kernels) -> None:
    raw = cells.encode_cell([b"a", b"b"], [cells.slot_column([1, 2])])
    for cut in (raw[:5], raw[: len(raw) - 1]):
        entries = [(cells.cell_key(0, SID, 0, 100, 1), cut)]
        try:
            want: Any = cells.find_windows(entries, b"a", zlib.crc32(b"a"))
        except Exception as exc:  # noqa: BLE001 - whatever the Python path raises
            with pytest.raises(type(exc)):
                kernels.find_windows(entries, b"a", zlib.crc32(b"a"))
        else:
            assert kernels.find_windows(entries, b"a", zlib.crc32(b"a")) == want
