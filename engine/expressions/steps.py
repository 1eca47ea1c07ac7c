"""Expressions as the per-record chain runs them: a filter's predicate, a ``with_columns``
projection, a key, an event time and an aggregate input, each a function of one record made
from the IR compiled to closures (``kernels.rows``), with the same semantics as the IR's
reference and as the columnar evaluator.

A record an expression fails on raises ``ir.ExprError`` whose message is the dead-letter
reason after the step's name, and names the expression: the chain writes ``filter (col("v") /
col("n") > 1) raised: division of 1 by zero``. The columnar loop must give the same reasons:
it builds them with ``failure`` and ``null_reason`` from the evaluator's per-row errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from weir.engine.expressions.builder import Expr
from weir.engine.expressions.render import render
from weir.engine.kernels import ir
from weir.engine.kernels.rows import compile_row

RecordFn = Callable[[Any], Any]
KEY_NEEDS = "a key must be a string or an int"
TIME_NEEDS = "an event time must be an integer (epoch milliseconds)"


def failure(expr: ir.Expr, why: str) -> str:
    """The reason for a record ``expr`` failed on (``why``: the IR's error), to follow the
    step's name: ``(col("v") / col("n")) raised: division of 1 by zero``."""
    return f"({render(expr)}) raised: {why}"


def null_reason(expr: ir.Expr, needs: str) -> str:
    """The reason for a record whose ``expr`` is NULL where a value is needed."""
    return f"({render(expr)}) is NULL; {needs}"


def not_an_object(rec: object) -> str:
    """An expression reads fields: a record that is not an object (a ``map`` made it so)."""
    return f"the record is {type(rec).__name__}, not an object with fields"


def _label(fn: RecordFn, expr: ir.Expr) -> RecordFn:
    fn.__qualname__ = render(expr)  # what a traceback or a repr of the step shows
    return fn


def _record_fn(expr: ir.Expr) -> RecordFn:
    f = compile_row(expr)

    def run(rec: Any) -> ir.Scalar:
        if type(rec) is not dict and not isinstance(rec, Mapping):
            raise ir.ExprError(failure(expr, not_an_object(rec)))
        try:
            return f(rec)
        except ir.ExprError as exc:
            raise ir.ExprError(failure(expr, str(exc))) from None

    return run


def predicate(expr: ir.Expr) -> RecordFn:
    """A filter's function: True where ``expr`` is TRUE, False where FALSE or NULL; a value
    that is not a boolean is the record's error."""
    f = _record_fn(expr)

    def keep(rec: Any) -> bool:
        v = f(rec)
        if v is True:
            return True
        if v is False or v is None:
            return False
        try:
            ir.truth(v)  # refuses every other value
        except ir.ExprError as exc:
            raise ir.ExprError(failure(expr, str(exc))) from None
        return False

    return _label(keep, expr)


def projection(columns: dict[str, ir.Expr]) -> RecordFn:
    """A ``with_columns`` step's function: the record with each output field set to its
    expression's value, every expression reading the input record (as Polars does)."""
    compiled = [(name, compile_row(e), e) for name, e in columns.items()]

    def project(rec: Any) -> dict[str, Any]:
        if type(rec) is not dict and not isinstance(rec, Mapping):
            raise ir.ExprError(not_an_object(rec))
        out = dict(rec)
        for name, f, e in compiled:
            try:
                out[name] = f(rec)
            except ir.ExprError as exc:
                raise ir.ExprError(f"{name}={failure(e, str(exc))}") from None
        return out

    project.__qualname__ = ", ".join(f"{n}={render(e)}" for n, e in columns.items())
    return project


def required(expr: ir.Expr, needs: str) -> RecordFn:
    """A key's or an event time's function: ``expr``'s value, which must not be NULL."""
    f = _record_fn(expr)

    def value(rec: Any) -> ir.Scalar:
        v: ir.Scalar = f(rec)
        if v is None:
            raise ir.ExprError(null_reason(expr, needs))
        return v

    return _label(value, expr)


def selector(e: Expr, needs: str) -> tuple[str | RecordFn, ir.Expr | None]:
    """A key's or an event time's selector and IR: a plain field stays a field name (the form
    every runtime reads directly, with its own reasons), anything else is its function
    (``required``) and IR."""
    node = e.ir
    if isinstance(node, ir.Col):
        return node.name, None
    return required(node, needs), node


def aggregate_input(expr: ir.Expr, counts_values: bool) -> RecordFn:
    """An aggregate's input: ``expr``'s value (NULL stays None, for the fold's check to
    refuse), or for ``count(expr)`` 1 where it is not NULL and 0 where it is."""
    f = _record_fn(expr)
    if not counts_values:
        return _label(f, expr)
    return _label(lambda rec: 0 if f(rec) is None else 1, expr)


def input_reason(expr: ir.Expr, rec: Any, value_of: RecordFn) -> str | None:
    """Why ``rec``'s input ``expr`` cannot be aggregated (None: it can)."""
    try:
        v = value_of(rec)
    except ir.ExprError as exc:
        return f"input {exc}"
    if v is None:
        return f"input {null_reason(expr, 'an aggregate takes numbers')}"
    if type(v) not in (int, float):
        return f"input ({render(expr)}) is {type(v).__name__} {v!r}, not a number"
    return None
