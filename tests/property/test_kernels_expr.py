"""The columnar expression evaluator against the IR's one-record reference (``ir.evaluate_row``),
on both kernel implementations: the same value (type for type), the same rows in error with the
same reasons."""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.kernels import Kernels, ir
from weir.engine.kernels.expr import ERROR, evaluate, filter_mask
from weir.engine.kernels.scan import scan_block

FIELDS = ("a", "b", "s")
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
field_values = st.one_of(
    st.none(),
    st.booleans(),
    I64,
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 2.5, 1e300]),
    st.sampled_from(["impression", "click", "imp", "", "é", "ad-1", "1", "x1.5"]),
    st.lists(st.integers(), max_size=1),
    st.just(1 << 64),
)
records = st.lists(
    st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=3), min_size=1, max_size=12
)
literals = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    I64,
    st.sampled_from([0.0, 2.5, -1.5]),
    st.sampled_from(["impression", "imp", "", "é"]),
)
leaves = st.one_of(st.sampled_from(FIELDS).map(ir.Col), literals.map(ir.Lit))


def _extend(inner: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    ops = st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"])
    arith = st.sampled_from(["add", "sub", "mul", "div", "floordiv", "mod"])
    text = st.sampled_from(["imp", "", "é", "ad", "n", "1"])
    pairs = st.lists(st.tuples(inner, inner), min_size=1, max_size=2).map(tuple)
    return st.one_of(
        st.builds(ir.Cmp, ops, inner, inner),
        st.builds(ir.Arith, arith, inner, inner),
        st.builds(ir.Neg, inner),
        st.builds(ir.And, inner, inner),
        st.builds(ir.Or, inner, inner),
        st.builds(ir.Not, inner),
        st.builds(ir.IsNull, inner),
        st.builds(ir.IsIn, inner, st.lists(literals, max_size=3).map(tuple)),
        st.builds(ir.StartsWith, inner, text),
        st.builds(ir.EndsWith, inner, text),
        st.builds(ir.Contains, inner, text),
        st.builds(ir.Cast, inner, st.sampled_from(["int", "float", "str"])),
        st.builds(ir.Coalesce, st.lists(inner, min_size=1, max_size=3).map(tuple)),
        st.builds(ir.Case, pairs, inner),
    )


exprs = st.recursive(leaves, _extend, max_leaves=5)


def _bits(x: Any) -> Any:
    return (float, struct.pack("<d", x)) if type(x) is float else (type(x), x)


@settings(max_examples=400)
@given(records, exprs)
def test_evaluator_equals_reference(kernels: Kernels, recs: list[dict[str, Any]], e: Any) -> None:
    block = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    vec, errors, data = evaluate(kernels, e, scan)
    for i, line in enumerate(block.splitlines()):
        rec = orjson.loads(line)  # the reference reads what the scanner reads
        try:
            want = ir.evaluate_row(e, rec)
        except ir.ExprError as exc:
            assert vec.tags[i] == ERROR and errors[i] == str(exc), (e, rec)
            continue
        assert i not in errors and vec.tags[i] != ERROR, (e, rec, errors.get(i))
        from weir.engine.kernels.expr import Evaluator

        ev = Evaluator(kernels, scan)
        ev.data = data
        assert _bits(ev.value(vec, i)) == _bits(want), (e, rec)


def test_filter_keeps_true_rows_only(kernels: Kernels) -> None:
    block = b'{"s":"impression"}\n{"s":"click"}\n{}\n{"s":1}\n'
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    keep, errors = filter_mask(kernels, ir.Cmp("eq", ir.Col("s"), ir.Lit("impression")), scan)
    assert keep.tolist() == [True, False, False, False] and errors == {}
    keep, errors = filter_mask(kernels, ir.Col("s"), scan)
    assert keep.tolist() == [False] * 4
    assert errors == {
        0: "str 'impression' is not a boolean",
        1: "str 'click' is not a boolean",
        3: "int 1 is not a boolean",
    }


def test_columns_of() -> None:
    e = ir.And(ir.Cmp("gt", ir.Col("b"), ir.Lit(1)), ir.IsIn(ir.Col("a"), ("x",)))
    assert ir.columns_of(e) == ["b", "a"]
