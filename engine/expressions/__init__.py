"""Expressions: ``weir.col("event") == "impression"``, ``weir.col("value") * 2``, in the style
of Polars, for ``filter``, ``with_columns``, ``key_by``, ``timestamp=`` and aggregate inputs.

An ``Expr`` is a small immutable tree; building one runs nothing. The job API compiles it to
the expression IR (``weir.engine.kernels.ir``), which the job graph carries
(``StatelessNode.expr``, ``KeyByNode.key_expr``, ...), and which runs per record today (the
IR's reference, compiled to closures by ``kernels.rows``) and on column batches where the
columnar loop takes a job. Semantics are SQL's (``docs/reference/expressions.md``): a missing
field and JSON ``null`` are NULL, NULL goes through arithmetic and comparisons, ``&``, ``|``
and ``~`` are three-valued, a filter keeps TRUE; int arithmetic is int64 and an overflow, a
zero divisor or a type mismatch is the record's error, which sends it to the dead letters
naming the expression.

Example:
    >>> from weir import col, lit
    >>> e = (col("event") == "impression") & (col("value") * 2 > 10)
    >>> e
    (col("event") == "impression") & (col("value") * 2 > 10)
    >>> col("v").is_in([1, 2]) | col("v").is_null()
    col("v").is_in([1, 2]) | col("v").is_null()
"""

from __future__ import annotations

from weir.engine.expressions.builder import (
    Expr,
    StringOps,
    Then,
    When,
    coalesce,
    col,
    lit,
    to_ir,
    when,
)
from weir.engine.expressions.render import render

__all__ = [
    "Expr",
    "StringOps",
    "Then",
    "When",
    "coalesce",
    "col",
    "lit",
    "render",
    "to_ir",
    "when",
]
