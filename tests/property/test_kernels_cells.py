"""The cell kernels, compiled and their twins. The lookup (``find_windows``): a key's rows in its
bucket's cells, each window's newest generation holding the key winning, every slot with its
type (``1`` is not ``1.0``; an int past int64 and lists stay msgpack), against a dict model.
A cell cut short answers as the Python path does, in either implementation. The encoder
(``encode_packed``): packed rows as cells byte for byte as ``cellcodec.encode_cells`` writes
them, CRC collisions (constructed) in key-byte order."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.kernels import Kernels
from weir.state import cells, layout
from weir.state.cellcodec import PackedRows

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


# two pairs of 8-byte strings with equal CRC-32s, as XOR differences: CRC-32 is affine, so for
# any 8 bytes c (after any common prefix, before any common suffix) c, c ^ D1, c ^ D2 and
# c ^ D1 ^ D2 share their CRC
D1, D2 = bytes.fromhex("38b4a43d7eb3cb65"), bytes.fromhex("712298f9dd1fb395")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


@st.composite
def _colliding(draw: st.DrawFn) -> list[bytes]:
    """Up to four keys of one CRC-32 (one cell, whatever the key groups' count)."""
    pre, core, post = draw(st.binary(max_size=3)), draw(st.binary(min_size=8, max_size=8)), b"k"
    group = [core, _xor(core, D1), _xor(core, D2), _xor(_xor(core, D1), D2)]
    picked = draw(st.lists(st.sampled_from(group), min_size=2, max_size=4, unique=True))
    return [pre + c + post for c in picked]


ENC_KEYS = st.one_of(
    st.sampled_from([b"", "é".encode(), b"a\x00", b"a", "ключ-🙂".encode(), b"long" * 40]),
    st.text(max_size=6).map(str.encode),
    st.binary(max_size=12),
)
I64 = st.integers(-(2**63), 2**63 - 1)
F64 = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(ENC_KEYS, max_size=80),
    st.lists(_colliding(), max_size=3),
    st.lists(st.sampled_from(["int", "float", "object"]), max_size=3),
    st.sampled_from([1, 2, 128, 1 << 15]),
    st.data(),
)
def test_encode_packed_writes_what_encode_cells_writes(
    kernels: Kernels,
    plain: list[bytes],
    collisions: list[list[bytes]],
    kinds: list[str],
    max_par: int,
    data: st.DataObject,
) -> None:
    keys = list(dict.fromkeys([k for group in collisions for k in group] + plain))
    keys = data.draw(st.permutations(keys))
    n = len(keys)
    crc = np.array([zlib.crc32(k) for k in keys], np.uint32)
    groups = (crc % max_par).astype(np.uint16)
    slots: list[Any] = []
    for kind in kinds:
        if kind == "int":
            slots.append(np.array(data.draw(st.lists(I64, min_size=n, max_size=n)), np.int64))
        elif kind == "float":
            slots.append(np.array(data.draw(st.lists(F64, min_size=n, max_size=n)), np.float64))
        else:  # an int past int64 and lists: msgpack, the Python path in both
            slots.append(data.draw(st.lists(st.one_of(NUMBER, SLOT), min_size=n, max_size=n)))
    end = data.draw(st.sampled_from([-(2**63), -7, 0, 10_000, 2**63 - 1]))
    gen = data.draw(st.integers(0, 2**64 - 1))
    coarse = data.draw(st.booleans())
    rows = cells.CellRows(keys, groups, slots)
    want = cells.encode_cells(rows, SID, end, gen, coarse)
    assert kernels.encode_packed(PackedRows.of(rows), SID, end, gen, coarse) == want
    given_crc = PackedRows.of(cells.CellRows(keys, groups, slots, crc))
    assert kernels.encode_packed(given_crc, SID, end, gen, coarse) == want
    fields = {cells.decode_cell_key(k)[2] for k, _ in want}
    assert all(cells.is_coarse(f) == coarse for f in fields)
    for k, _ in want:  # each row in its bucket's cell of this grain
        field = cells.decode_cell_key(k)[2]
        for key in cells.Cell(dict(want)[k]).keys():
            b = cells.bucket_of(key)
            assert field == (cells.coarse_of(b) if coarse else b)


@pytest.mark.parametrize("max_par", [1, 128])
def test_encode_packed_many_rows_a_cell(kernels: Kernels, max_par: int) -> None:
    """Thousands of rows, hundreds a cell (one key group: 64 cells), colliding CRCs among
    them, the key groups not the CRC's (the encoder takes the groups it is given)."""
    rng = np.random.default_rng(max_par)
    keys = [f"id-{i}".encode() for i in rng.permutation(30_000)[:20_000]]
    keys += [b"x" + c for c in (b"01234567", _xor(b"01234567", D1), _xor(b"01234567", D2))]
    n = len(keys)
    groups = rng.integers(0, max_par, n).astype(np.uint16)
    slots = [rng.integers(-(2**62), 2**62, n), rng.standard_normal(n)]
    rows = cells.CellRows(keys, groups, slots)
    want = cells.encode_cells(rows, SID, 10_000, 5)
    assert len(want) > 64 * min(max_par, 2) - 8
    assert kernels.encode_packed(PackedRows.of(rows), SID, 10_000, 5) == want
    coarse = cells.encode_cells(rows, SID, 10_000, 5, coarse=True)
    fine_cells = [cells.decode_cell_key(k)[:3:2] for k, _ in want]  # (key group, bucket)
    assert len(coarse) == len({(g, cells.coarse_of(b)) for g, b in fine_cells}) < len(want)
    assert kernels.encode_packed(PackedRows.of(rows), SID, 10_000, 5, True) == coarse


def test_encode_packed_refuses_what_encode_cells_refuses(kernels: Kernels) -> None:
    """A slot column of another dtype, an end past 64 bits: the same errors."""
    rows = cells.CellRows([b"a"], np.zeros(1, np.uint16), [np.array([1], np.int32)])
    with pytest.raises(Exception) as want:  # noqa: PT011 - whatever encode_cells raises
        cells.encode_cells(rows, SID, 5, 0)
    with pytest.raises(type(want.value)):
        kernels.encode_packed(PackedRows.of(rows), SID, 5, 0)
    ok = cells.CellRows([b"a"], np.zeros(1, np.uint16), [np.array([1], np.int64)])
    with pytest.raises(Exception) as want:  # noqa: PT011
        cells.encode_cells(ok, SID, 2**64, 0)
    with pytest.raises(type(want.value)):
        kernels.encode_packed(PackedRows.of(ok), SID, 2**64, 0)


def _gen_cell(keys: list[bytes], kinds: list[str], data: st.DataObject) -> bytes:
    """One generation's cell of ``keys`` (no key twice), each slot of its kind."""
    strategy = {"int": I64, "float": F64, "object": st.lists(I64, max_size=2)}
    slots = [
        cells.slot_column(data.draw(st.lists(strategy[k], min_size=len(keys), max_size=len(keys))))
        for k in kinds
    ]
    return cells.encode_cell(keys, slots)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(ENC_KEYS, max_size=12, unique=True), min_size=1, max_size=7),
    st.lists(_colliding(), max_size=2),
    st.lists(st.sampled_from(["int", "float"]), max_size=3),
    st.booleans(),
    st.data(),
)
def test_merge_cells_merges_as_the_twin_and_the_newest_row_wins(
    kernels: Kernels,
    gens: list[list[bytes]],
    collisions: list[list[bytes]],
    kinds: list[str],
    mixed: bool,
    data: st.DataObject,
) -> None:
    """A cell's generations (oldest first), merged: byte for byte what ``cells.merge`` makes,
    and each key's slots those of the newest generation holding it (a dict model). ``mixed``:
    one generation's slot is of another kind (or msgpack), which the twin merges."""
    extra = [data.draw(st.sampled_from([[], *collisions])) if collisions else [] for _ in gens]
    gens = [list(dict.fromkeys(g + more)) for g, more in zip(gens, extra, strict=True)]
    raws = []
    for i, keys in enumerate(gens):
        own = list(kinds)
        if mixed and own and i == len(gens) - 1:
            own[0] = data.draw(st.sampled_from(["int", "float", "object"]))
        raws.append(_gen_cell(keys, own, data))
    merged = kernels.merge_cells(raws)
    assert merged == cells.merge(raws)
    model: dict[bytes, list[Any]] = {}
    for raw in raws:
        model.update(cells.Cell(raw).rows())
    got = dict(cells.Cell(merged).rows())
    assert got.keys() == model.keys()
    for key, slots in model.items():
        assert _typed_same(got[key], slots), (key, got[key], slots)


def _typed_same(a: list[Any], b: list[Any]) -> bool:
    """Slots equal value for value and type for type (NaN equal to NaN)."""
    return len(a) == len(b) and all(
        type(x) is type(y) and (x == y or (x != x and y != y)) for x, y in zip(a, b, strict=True)
    )


def test_merge_cells_refuses_a_cell_cut_short_as_the_twin_does(kernels: Kernels) -> None:
    whole = cells.encode_cell([b"a", b"b"], [np.array([1, 2], np.int64)])
    newer = cells.encode_cell([b"b"], [np.array([3], np.int64)])
    with pytest.raises(Exception) as twin:
        cells.merge([whole[:-5], newer])
    with pytest.raises(type(twin.value)):
        kernels.merge_cells([whole[:-5], newer])
    assert kernels.merge_cells([whole]) == whole
