"""The interner against ``state.keygroups`` and the fold against the generated Python fold
(``operators.fold.FoldPlan``), on both kernel implementations: the same ids, key groups and
partitions; the same accumulators value for value and type for type (int64 overflow into
Python ints, float sums in arrival order, bit for bit)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.kernel_impls import exported_row
from weir.engine import agg
from weir.engine.kernels import Kernels
from weir.engine.kernels.fold import fold_window
from weir.engine.kernels.scan import FLOAT, INT
from weir.engine.runtime.stored.fold import FoldPlan
from weir.state.keygroups import key_group, operator_for_key_group


def test_the_interner_keeps_every_id_while_its_table_grows(kernels: Kernels) -> None:
    """Past ten doublings of the table (1,024 slots to 2M, grown in place by ``mremap`` in the
    compiled kernel): every key keeps its first id and reads back, short keys (held in the
    slot) and long ones (the arena) alike, and interning them all again adds none."""
    keys = [f"id-{i}" if i % 3 else f"a-much-longer-key-past-the-slot-{i}" for i in range(600_000)]
    raw = [k.encode() for k in keys]
    block = b"".join(raw)
    lens = np.array([len(r) for r in raw], np.int32)
    starts = np.zeros(len(raw), np.int64)
    starts[1:] = np.cumsum(lens)[:-1]
    it = kernels.Interner(128)
    for at in range(0, len(raw), 50_000):  # grows between batches and within them
        assert it.intern(block, starts[at : at + 50_000], lens[at : at + 50_000]).tolist() == (
            list(range(at, min(at + 50_000, len(raw))))
        )
    order = np.random.default_rng(7).permutation(len(raw))
    again = it.intern(block, starts[order], lens[order])
    assert (again == order).all() and len(it) == len(raw)
    assert [it.key(int(i)) for i in order[:1000]] == [keys[i] for i in order[:1000]]
    # gathered (short keys by a fixed-size move that reads past them): the newest key, the
    # arena's last bytes, among them
    picked = np.concatenate((order[:5000], [len(raw) - 1])).astype(np.int32)
    blob, offs, _, _ = it.gather_keys(picked)
    assert blob == b"".join(raw[i] for i in picked.tolist()) and offs[-1] == len(blob)


@given(st.lists(st.text(max_size=12), min_size=1, max_size=60), st.integers(1, 1 << 15), st.data())
def test_interner(kernels: Kernels, keys: list[str], max_par: int, data: st.DataObject) -> None:
    it = kernels.Interner(max_par)
    raw = [k.encode() for k in keys]
    block = b"".join(raw)
    starts = np.cumsum([0] + [len(r) for r in raw[:-1]]).astype(np.int64)
    lens = np.array([len(r) for r in raw], np.int32)
    half = len(keys) // 2  # two batches: ids carry over
    ids = np.concatenate(
        [it.intern(block, starts[:half], lens[:half]), it.intern(block, starts[half:], lens[half:])]
    )
    first: dict[str, int] = {}
    for k in keys:
        first.setdefault(k, len(first))
    assert ids.tolist() == [first[k] for k in keys]
    assert it.keys() == list(first) and len(it) == len(first)
    first_raw = [k.encode() for k in first]
    assert it.groups(ids).tolist() == [key_group(k, max_par) for k in keys]
    # strs intern to the same ids; routing computes the same groups without an interner
    assert it.intern_list(keys).tolist() == ids.tolist()
    again = kernels.Interner(max_par)
    assert again.intern_list(keys).tolist() == ids.tolist() and again.keys() == list(first)
    groups = [key_group(k, max_par) for k in keys]
    assert kernels.span_groups(block, starts, lens, max_par).tolist() == groups
    assert kernels.list_groups(keys, max_par).tolist() == groups
    # the exchange's key column: the keys' bytes end to end, and Arrow's offsets
    packed, offsets = kernels.pack_strs(keys)
    assert packed == block and offsets.tolist() == [0, *np.cumsum(lens).tolist()]
    spans = kernels.gather_spans(block, starts[::-1].copy(), lens[::-1].copy())
    assert spans[0] == b"".join(reversed(raw))
    p = data.draw(st.integers(1, max_par))
    assert it.partitions(ids, p).tolist() == [
        operator_for_key_group(max_par, p, key_group(k, max_par)) for k in keys
    ]
    assert kernels.crc32_of(block) == zlib.crc32(block)
    # the cell writer's keys: bytes end to end, offsets, CRCs and key groups, in the ids'
    # order given
    picked = ids[::-1].copy()
    blob, offs, crcs, groups = it.gather_keys(picked)
    want = [first_raw[k] for k in picked.tolist()]
    assert blob == b"".join(want) and offs.tolist() == [0, *np.cumsum([len(r) for r in want])]
    assert crcs.dtype == np.uint32 and crcs.tolist() == [zlib.crc32(r) for r in want]
    assert groups.dtype == np.uint16 and groups.tolist() == it.groups(picked).tolist()
    assert it.gather_keys(np.zeros(0, np.int32))[0] == b""
    # a fired window's cleanup timers: the CRCs alone, kept from when each key was new
    only = it.gather_crcs(picked)
    assert only.dtype == np.uint32 and only.tolist() == crcs.tolist()
    assert len(it.gather_crcs(np.zeros(0, np.int32))) == 0
    for gather in (it.gather_crcs, it.gather_keys, it.prefixes):  # an id past the last
        with pytest.raises(IndexError, match="is not interned"):
            gather(np.array([0, len(first)], np.int32))


BIG = (1 << 63) - 1
ints = (
    st.integers(-(1 << 63), BIG)
    | st.integers(-1000, 1000)
    | st.sampled_from([BIG, -BIG - 1, BIG - 1])
)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64) | st.sampled_from(
    [0.0, -0.0, 0.1, 1e308]
)
numbers = st.one_of(ints, floats)
AGGS = {
    "count": agg.count(),
    "sum": agg.sum("v"),
    "min": agg.min("v"),
    "max": agg.max("v"),
    "mean": agg.mean("v"),
}


def _bits(x: Any) -> Any:
    return (float, struct.pack("<d", x)) if type(x) is float else (type(x), x)


@given(
    st.lists(st.lists(st.tuples(st.integers(0, 6), numbers), max_size=30), min_size=1, max_size=3),
    st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=5, unique=True),
)
def test_fold_equals_python_fold(
    kernels: Kernels, batches: list[list[tuple[int, Any]]], kinds: list[str]
) -> None:
    plan = FoldPlan({k: AGGS[k] for k in kinds})
    acc = kernels.WindowAcc(tuple(kinds))
    buckets: dict[int, dict[str, list[Any]]] = {}
    dirty: dict[int, set[str]] = {}
    for batch in batches:
        if not batch:
            continue
        kids = np.array([k for k, _ in batch], np.int32)
        vals = [v for _, v in batch]
        tags = np.array([FLOAT if type(v) is float else INT for v in vals], np.uint8)
        i64 = np.array([v if type(v) is int else 0 for v in vals], np.int64)
        f64 = np.array([v if type(v) is float else 0.0 for v in vals], np.float64)
        col = (tags, i64, f64)
        fold_window(acc, kids, [None if k == "count" else col for k in kinds])
        keys = [str(k) for k, _ in batch]
        plan.fold(buckets, dirty, keys, [10] * len(keys), *([vals] if plan.fields else []), [])
        assert sorted(acc.take_dirty().tolist()) == sorted(int(k) for k in dirty.pop(10))
    want = buckets.get(10, {})
    for kid in range(8):
        got = acc.slots(kid)
        expected = want.get(str(kid))
        if expected is None:
            assert got is None
        else:
            assert got is not None and [_bits(x) for x in got] == [_bits(x) for x in expected]
    assert acc.present_ids().tolist() == sorted(int(k) for k in want)
    ids, columns = acc.export()  # the same accumulators as columns
    assert ids.tolist() == [int(k) for k in want]  # in the order the keys first arrived
    for row, kid in enumerate(ids.tolist()):
        exported = exported_row(columns, row)
        assert [_bits(x) for x in exported] == [_bits(x) for x in want[str(kid)]]


PAST_INT64 = st.sampled_from([BIG + 1, BIG + 10**6, -BIG - 2, (1 << 64) - 1])


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("fold"), st.integers(0, 5), numbers),
            st.tuples(st.just("load"), st.integers(0, 5), st.one_of(numbers, PAST_INT64)),
        ),
        max_size=40,
    ),
    st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=5, unique=True),
)
def test_load_then_fold_equals_python_fold(
    kernels: Kernels, steps: list[tuple[str, int, Any]], kinds: list[str]
) -> None:
    """``load`` sets a key's slots (a restored window, or a row the Python fold took), ints
    past int64 included, for every kind; folding goes on from them exactly as the Python fold
    would, and ``export_rows`` gives the chosen keys' slots in the order asked."""
    plan = FoldPlan({k: AGGS[k] for k in kinds})
    acc = kernels.WindowAcc(tuple(kinds))
    bucket: dict[str, list[Any]] = {}
    for op, kid, v in steps:
        key = str(kid)
        if op == "load":
            slots: list[Any] = []
            for kind in kinds:
                slots.extend({"count": [3], "mean": [v, 2]}.get(kind, [v]))
            bucket[key] = list(slots)
            acc.load(kid, slots, dirty=True)
            continue
        tag = FLOAT if type(v) is float else INT
        col = (
            np.array([tag], np.uint8),
            np.array([v if tag == INT else 0], np.int64),
            np.array([v if tag == FLOAT else 0.0]),
        )
        fold_window(acc, np.array([kid], np.int32), [None if k == "count" else col for k in kinds])
        plan.fold({1: bucket}, {}, [key], [1], *([[v]] if plan.fields else []), [])
    assert len(acc) == len(bucket)
    for key, want in bucket.items():
        got = acc.slots(int(key))
        assert got is not None and [_bits(x) for x in got] == [_bits(x) for x in want]
    chosen = np.array([int(k) for k in reversed(bucket)], np.int32)
    columns = acc.export_rows(chosen)
    for row, kid in enumerate(chosen.tolist()):
        got = exported_row(columns, row)
        assert [_bits(x) for x in got] == [_bits(x) for x in bucket[str(kid)]]
    assert sorted(acc.take_dirty().tolist()) == sorted(int(k) for k in bucket)
