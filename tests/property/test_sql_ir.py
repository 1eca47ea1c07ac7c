"""SQL's WHERE as the expression IR (``sql.toir``) against SQL's own closure
(``sql.scalar.Compiler``), on generated conditions and records with NULLs, missing fields and
values of every JSON type: wherever the IR gives a value it is the closure's, wherever the
closure raises the IR fails, and the columnar evaluator (both kernel implementations) keeps
exactly the rows the closure keeps on every batch it does not send to the record path."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.kernels import Kernels, ir
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.scan import scan_block
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.scalar import Compiler
from weir.engine.sql.toir import to_ir

FIELDS = ("a", "b", "s")
field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 2.5]),
    st.sampled_from(["impression", "click", "imp", "", "é", "a%b", "1"]),
    st.lists(st.integers(), max_size=1),
    st.just(1 << 64),
)
records = st.lists(
    st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=3), min_size=1, max_size=10
)
literals = st.sampled_from(
    ["NULL", "TRUE", "FALSE", "0", "1", "-2", "2.5", "9223372036854775807", "'imp'", "''",
     "'impression'", "'é'", "'1'"]
)  # fmt: skip
patterns = st.sampled_from(["'imp%'", "'%ion'", "'%press%'", "'%'", "'i_p%'", "'imp'", "''"])
leaves = st.one_of(st.sampled_from(FIELDS), literals)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(
        ["=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "AND", "OR"]
    )
    lits = st.lists(literals, min_size=1, max_size=3).map(", ".join)
    return st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", inner, binary, inner),
        inner.map(lambda a: f"(NOT {a})"),
        inner.map(lambda a: f"(-({a}))"),
        inner.map(lambda a: f"({a} IS NULL)"),
        inner.map(lambda a: f"({a} IS NOT NULL)"),
        st.builds(lambda a, n, v: f"({a} {n}IN ({v}))", inner, st.sampled_from(["", "NOT "]), lits),
        st.builds(lambda a, lo, hi: f"({a} BETWEEN {lo} AND {hi})", inner, literals, literals),
        st.builds(
            lambda a, n, p: f"({a} {n}LIKE {p})", inner, st.sampled_from(["", "NOT "]), patterns
        ),  # fmt: skip
    )


conditions = st.recursive(leaves, _extend, max_leaves=5)


def _parse(text: str) -> Any:
    select = sqlglot.parse_one(f"SELECT 1 FROM t WHERE {text}", dialect=WeirFlink)
    return select.args["where"].this


def _closure(fn: Any, rec: dict[str, Any]) -> tuple[bool, Any]:
    try:
        return True, fn(rec)
    except Exception as exc:  # noqa: BLE001 - any error is the record's dead letter
        return False, exc


def _ir(expr: ir.Expr, rec: dict[str, Any]) -> tuple[bool, Any]:
    try:
        return True, ir.evaluate_row(expr, rec)
    except ir.ExprError as exc:
        return False, exc


def _same(x: Any, y: Any) -> bool:
    if type(x) is float and type(y) is float:
        return x == y or struct.pack("<d", x) == struct.pack("<d", y)
    return type(x) is type(y) and x == y


@settings(max_examples=600, deadline=None)
@given(conditions, records)
def test_ir_equals_closure(text: str, recs: list[dict[str, Any]]) -> None:
    node = _parse(text)
    expr = to_ir(node, lambda c: c.name)
    if isinstance(expr, str):
        return  # kept on the closure path, with the reason weir explain shows
    fn = Compiler(lambda c: c.name).compile(node)
    for rec in recs:
        closure_ok, value = _closure(fn, rec)
        ir_ok, got = _ir(expr, rec)
        if not closure_ok:
            assert not ir_ok, (text, rec, value, got)
        elif ir_ok:
            assert _same(value, got), (text, rec, value, got)


@settings(max_examples=300, deadline=None)
@given(conditions, records)
def test_columns_keep_the_closures_rows(
    kernels: Kernels, text: str, recs: list[dict[str, Any]]
) -> None:
    node = _parse(text)
    expr = to_ir(node, lambda c: c.name)
    if isinstance(expr, str):
        return
    where = Compiler(lambda c: c.name).predicate(node)
    block = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    mask, errors = filter_mask(kernels, expr, scan)
    for i, rec in enumerate(recs):
        ok, kept = _closure(where, rec)
        if i in errors:
            continue  # the batch goes to the record path, which writes the closure's reason
        assert ok, (text, rec, kept)
        assert bool(mask[i]) == kept, (text, rec)
    assert mask.dtype == np.bool_


def test_the_peer_where_translates() -> None:
    expr = to_ir(_parse("event = 'impression'"), lambda c: c.name)
    assert expr == ir.Cmp("eq", ir.Col("event"), ir.Lit("impression"))


def test_untranslated_clauses_say_why() -> None:
    why = to_ir(_parse("a / 2 > 1"), lambda c: c.name)
    assert isinstance(why, str) and "truncate toward zero" in why
    why = to_ir(_parse("a = b"), lambda c: c.name)
    assert isinstance(why, str) and "TRUE = 1" in why
    why = to_ir(_parse("UPPER(s) = 'X'"), lambda c: c.name)
    assert isinstance(why, str) and why.startswith("UPPER(s)")
