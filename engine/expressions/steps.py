"""Expressions as the per-record chain runs them: a filter's predicate, a ``with_columns``
projection, a key, an event time and an aggregate input, each a function of one record that
``kernels.rows`` generates from the IR, with the same semantics as the IR's reference and as
the columnar evaluator.

A record an expression fails on raises ``ir.ExprError`` whose message is the dead-letter
reason after the step's name, and names the expression: the chain writes ``filter (col("v") /
col("n") > 1) raised: 1 / 0: division by zero``. The columnar loop must give the same reasons:
it builds them with ``failure`` and ``null_reason`` from the evaluator's per-row errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.engine.expressions.builder import Expr
from weir.engine.expressions.render import render
from weir.engine.kernels import ir
from weir.engine.kernels.rows import compile_columns, compile_row

RecordFn = Callable[[Any], Any]
KEY_NEEDS = "a key must be a string or an int"
TIME_NEEDS = "an event time must be an integer (epoch milliseconds)"


def failure(expr: ir.Expr, why: str) -> str:
    """The reason for a record ``expr`` failed on (``why``: the IR's error), to follow the
    step's name: ``(col("v") / col("n")) raised: 1 / 0: division by zero``."""
    return f"({render(expr)}) raised: {why}"


def null_reason(expr: ir.Expr, needs: str) -> str:
    """The reason for a record whose ``expr`` is NULL where a value is needed."""
    return f"({render(expr)}) is NULL; {needs}"


def predicate(expr: ir.Expr) -> RecordFn:
    """A filter's function: True where ``expr`` is TRUE, False where FALSE or NULL; a value
    that is not a boolean is the record's error."""
    fn = compile_row(expr, result="predicate", wrap=lambda why: failure(expr, why))
    return _label(fn, expr)


def projection(columns: dict[str, ir.Expr]) -> RecordFn:
    """A ``with_columns`` step's function: the record with each output field set to its
    expression's value, every expression reading the input record (as Polars does)."""
    fn = compile_columns(columns, lambda name, why: f"{name}={failure(columns[name], why)}")
    fn.__qualname__ = ", ".join(f"{n}={render(e)}" for n, e in columns.items())
    return fn


def required(expr: ir.Expr, needs: str) -> RecordFn:
    """A key's or an event time's function: ``expr``'s value, which must not be NULL."""
    fn = compile_row(expr, wrap=lambda why: failure(expr, why), null=null_reason(expr, needs))
    return _label(fn, expr)


def _label(fn: RecordFn, expr: ir.Expr) -> RecordFn:
    fn.__qualname__ = render(expr)  # what a traceback or a repr of the step shows
    return fn


def selector(e: Expr, needs: str) -> tuple[str | RecordFn, ir.Expr | None]:
    """A key's or an event time's selector and IR: a plain field stays a field name (the form
    every runtime reads directly, with its own reasons), anything else is its function
    (``required``) and IR."""
    node = e.ir
    if isinstance(node, ir.Col):
        return node.name, None
    return required(node, needs), node


def aggregate_input(expr: ir.Expr) -> RecordFn:
    """An aggregate's input: ``expr``'s value, NULL staying None (the fold's rules, in
    ``runtime/stored/fold.py``, say whether a NULL is skipped, counted out or refused)."""
    fn = compile_row(expr, wrap=lambda why: failure(expr, why))
    return _label(fn, expr)
