"""``record_columns`` (fields of decoded records as tagged columns) against the dict path's own
type rules, on both kernel implementations: exact types (a bool is not an int, an int past
int64 is an object), absent fields, and records that are not dicts refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import ABSENT, FALSE, FLOAT, INT, NULL, OTHER, STR, TRUE

I64 = (-(1 << 63), (1 << 63) - 1)
VALUES = st.one_of(
    st.integers(*I64),
    st.integers(min_value=I64[1] + 1) | st.integers(max_value=I64[0] - 1),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
RECORDS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), VALUES), max_size=20)


def _expected(v: Any) -> tuple[int, int, float, Any]:
    """(tag, i64, f64, object) as the dict path's exact type checks see ``v``."""
    t = type(v)
    if t is int and I64[0] <= v <= I64[1]:
        return INT, v, 0.0, None
    if t is float:
        return FLOAT, 0, v, None
    if v is None:
        return NULL, 0, 0.0, None
    if t is bool:
        return (TRUE if v else FALSE), 0, 0.0, None
    if t is str:
        return STR, len(v), 0.0, v
    return OTHER, 0, 0.0, v


@given(RECORDS)
def test_record_columns_tag_every_value_by_its_exact_type(
    kernels: Kernels, recs: list[dict[str, Any]]
) -> None:
    names = ("a", "b", "c")
    tags, i64, f64, objects = kernels.record_columns(recs, names)
    assert tags.shape == i64.shape == f64.shape == (3, len(recs))
    for j, name in enumerate(names):
        held = objects[j]
        for i, rec in enumerate(recs):
            if name not in rec:
                assert tags[j, i] == ABSENT
                assert held is None or held[i] is None
                continue
            tag, iv, fv, obj = _expected(rec[name])
            assert (int(tags[j, i]), int(i64[j, i])) == (tag, iv)
            assert float(f64[j, i]) == fv or (fv != fv and f64[j, i] != f64[j, i])
            if obj is None:
                assert held is None or held[i] is None
            else:
                assert held is not None and held[i] is obj


def test_record_columns_refuses_records_that_are_not_dicts(kernels: Kernels) -> None:
    with pytest.raises(TypeError, match="record 1 is a list"):
        kernels.record_columns([{"a": 1}, [1]], ("a",))
