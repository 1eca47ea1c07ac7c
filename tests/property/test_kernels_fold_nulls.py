"""SQL's NULL-skipping aggregates in the fold kernel (``sum``/``min``/``max``/``mean``/``avg``
with ``nulls="skip"``, ``count(x)``) against the generated Python fold (``FoldPlan``), on both
kernel implementations: NULL and absent inputs pass over the aggregate, a slot that saw only
NULLs is None (a skipping mean's sum is int 0), value for value and type for type, through
``load`` and ``export`` too."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.support.kernel_impls import exported_row
from weir.engine import agg
from weir.engine.columnar import kernel_kind
from weir.engine.kernels import Kernels
from weir.engine.kernels.fold import fold_window
from weir.engine.kernels.scan import ABSENT, FLOAT, INT, NULL
from weir.engine.runtime.stored.fold import FoldPlan

BIG = (1 << 63) - 1
ABSENT_V: Any = object()  # a record without the field (NULL to the Python fold)
values = st.one_of(
    st.integers(-(1 << 63), BIG),
    st.sampled_from([BIG, -BIG - 1, 0, 1, -1]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.0, -0.0, 0.5]),
    st.none(),
    st.just(ABSENT_V),
)
AGGS = {
    "count": agg.count(),
    "count_v": agg.count("v"),
    "sum": agg.sum("v", nulls="skip"),
    "min": agg.min("v", nulls="skip"),
    "max": agg.max("v", nulls="skip"),
    "mean": agg.mean("v", nulls="skip"),
    "avg": agg.avg("v"),
}


def _bits(x: Any) -> Any:
    return (float, struct.pack("<d", x)) if type(x) is float else (type(x), x)


def _column(vals: list[Any]) -> tuple[Any, Any, Any]:
    def tag(v: Any) -> int:
        if v is ABSENT_V:
            return ABSENT
        return NULL if v is None else FLOAT if type(v) is float else INT

    return (
        np.array([tag(v) for v in vals], np.uint8),
        np.array([v if type(v) is int else 0 for v in vals], np.int64),
        np.array([v if type(v) is float else 0.0 for v in vals], np.float64),
    )


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("fold"), st.lists(st.tuples(st.integers(0, 5), values), max_size=20)),
            st.tuples(st.just("load"), st.integers(0, 5)),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.sampled_from(sorted(AGGS)), min_size=1, max_size=5, unique=True),
)
def test_skipping_fold_equals_python_fold(
    kernels: Kernels, steps: list[tuple[Any, ...]], names: list[str]
) -> None:
    aggs = {n: AGGS[n] for n in names}
    plan = FoldPlan(aggs)  # type: ignore[arg-type]
    kinds = tuple(kernel_kind(a) for a in aggs.values())
    acc = kernels.WindowAcc(kinds)
    bucket: dict[str, list[Any]] = {}
    for step in steps:
        if step[0] == "load":  # a restored window's slots, NULLs included, then folded on
            kid = step[1]
            key = str(kid)
            if key in bucket:
                acc.load(kid, list(bucket[key]), dirty=True)
            continue
        batch = step[1]
        if not batch:
            continue
        kids = np.array([k for k, _ in batch], np.int32)
        vals = [v for _, v in batch]
        col = _column(vals)
        fold_window(acc, kids, [None if k == "count" else col for k in kinds])
        py_vals = [None if v is ABSENT_V else v for v in vals]
        keys = [str(k) for k, _ in batch]
        plan.fold({1: bucket}, {}, keys, [1] * len(keys), *([py_vals] if plan.fields else []), [])
    for key, want in bucket.items():
        got = acc.slots(int(key))
        assert got is not None and [_bits(x) for x in got] == [_bits(x) for x in want]
    assert len(acc) == len(bucket)
    ids, columns = acc.export()
    for row, kid in enumerate(ids.tolist()):
        got = exported_row(columns, row)
        assert [_bits(x) for x in got] == [_bits(x) for x in bucket[str(kid)]]
