"""The expression IR (``ir``) compiled to Python closures that evaluate one record: what the
per-record chain runs for an expression until the columnar loop takes the job.

``compile_row(expr)`` gives a function of a decoded record (a dict) equal to
``ir.evaluate_row(expr, rec)`` value for value and error for error: each node's closure calls
the reference's own helpers (``ir.compare``, ``ir.arith``, ...) in the reference's order, so
the only thing compiled away is the walk over the tree (a few ``isinstance`` checks per node
per record). The common leaves (a field, a literal, a field against a literal) get closures of
their own, checked against the reference by the same Hypothesis suite
(``tests/property/test_expressions.py``).

Example:
    >>> from weir.engine.kernels import ir
    >>> f = compile_row(ir.Cmp("eq", ir.Col("event"), ir.Lit("click")))
    >>> f({"event": "click"}), f({"event": "view"}), f({})
    (True, False, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from weir.engine.kernels import ir

RowFn = Callable[[Mapping[str, Any]], ir.Scalar]


def compile_row(expr: ir.Expr) -> RowFn:
    """``expr`` as a function of one record (see the module docstring).

    Raises:
        TypeError: ``expr`` is not an IR node.
    """
    build = _BUILDERS.get(type(expr))
    if build is None:
        raise TypeError(f"{expr!r} is not an expression IR node")
    return build(expr)


def _col(e: ir.Col) -> RowFn:
    name, field_value = e.name, ir.field_value
    scalar = frozenset({str, float, bool, type(None)})

    def col(rec: Mapping[str, Any]) -> ir.Scalar:
        v = rec.get(name)
        return v if type(v) in scalar else field_value(name, v)

    return col


def _lit(e: ir.Lit) -> RowFn:
    value = e.value
    return lambda rec: value


def _cmp(e: ir.Cmp) -> RowFn:
    left, right, op, compare = compile_row(e.left), compile_row(e.right), e.op, ir.compare
    if isinstance(e.right, ir.Lit) and type(e.right.value) is str and op in ("eq", "ne"):
        lit, eq = e.right.value, op == "eq"

        def cmp_str(rec: Mapping[str, Any]) -> bool | None:
            v = left(rec)
            if v is None:
                return None
            return (type(v) is str and v == lit) is eq

        return cmp_str
    return lambda rec: compare(op, left(rec), right(rec))


def _arith(e: ir.Arith) -> RowFn:
    left, right, op, arith = compile_row(e.left), compile_row(e.right), e.op, ir.arith
    return lambda rec: arith(op, left(rec), right(rec))


def _neg(e: ir.Neg) -> RowFn:
    x, negate = compile_row(e.x), ir.negate
    return lambda rec: negate(x(rec))


def _logic(e: ir.And | ir.Or) -> RowFn:
    left, right, logic, truth = compile_row(e.left), compile_row(e.right), ir.logic, ir.truth
    return lambda rec: logic(e, truth(left(rec)), truth(right(rec)))


def _not(e: ir.Not) -> RowFn:
    x, truth = compile_row(e.x), ir.truth

    def not_(rec: Mapping[str, Any]) -> bool | None:
        t = truth(x(rec))
        return None if t is None else not t

    return not_


def _isnull(e: ir.IsNull) -> RowFn:
    x = compile_row(e.x)
    return lambda rec: x(rec) is None


def _isin(e: ir.IsIn) -> RowFn:
    x, values, compare = compile_row(e.x), e.values, ir.compare

    def isin(rec: Mapping[str, Any]) -> bool | None:
        v = x(rec)
        return None if v is None else any(compare("eq", v, w) for w in values)

    return isin


def _string(e: ir.StartsWith | ir.EndsWith | ir.Contains) -> RowFn:
    x, test = compile_row(e.x), ir.string_test
    return lambda rec: test(e, x(rec))


def _cast(e: ir.Cast) -> RowFn:
    x, to, cast = compile_row(e.x), e.to, ir.cast
    return lambda rec: cast(x(rec), to)


def _coalesce(e: ir.Coalesce) -> RowFn:
    xs = [compile_row(x) for x in e.xs]

    def coalesce(rec: Mapping[str, Any]) -> ir.Scalar:
        for x in xs:
            v = x(rec)
            if v is not None:
                return v
        return None

    return coalesce


def _case(e: ir.Case) -> RowFn:
    whens = [(compile_row(c), compile_row(v)) for c, v in e.whens]
    otherwise, truth = compile_row(e.otherwise), ir.truth

    def case(rec: Mapping[str, Any]) -> ir.Scalar:
        for cond, then in whens:
            if truth(cond(rec)) is True:
                return then(rec)
        return otherwise(rec)

    return case


_BUILDERS: dict[type, Callable[[Any], RowFn]] = {
    ir.Col: _col, ir.Lit: _lit, ir.Cmp: _cmp, ir.Arith: _arith, ir.Neg: _neg, ir.And: _logic,
    ir.Or: _logic, ir.Not: _not, ir.IsNull: _isnull, ir.IsIn: _isin, ir.StartsWith: _string,
    ir.EndsWith: _string, ir.Contains: _string, ir.Cast: _cast, ir.Coalesce: _coalesce,
    ir.Case: _case,
}  # fmt: skip
