"""A join's residual condition: the ``ON`` terms that are neither key equalities nor the time
bounds (``t1.id <> 'L-5'``, ``NOT (t1.x = 1 OR t2.y = 2)``), compiled once into a predicate of
a candidate pair. A pair joins only when the condition is TRUE (SQL's three-valued logic: NULL
does not join); in an outer join a row whose every candidate fails it is padded with NULLs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from weir.engine.sql.scalar import Compiler

PairPredicate = Callable[[Any, Any], bool]


class _Pair:
    """Both records of a candidate pair, read by the compiled condition as one record whose
    fields are ``"<side>:<field>"`` (``side`` 0 for the left table, 1 for the right)."""

    __slots__ = ("sides",)

    def __init__(self, left: Any, right: Any) -> None:
        self.sides = (left, right)

    def get(self, name: str) -> Any:
        record = self.sides[name[0] == "1"]
        return None if record is None else record.get(name[2:])


def pair_condition(
    terms: Sequence[exp.Expr],
    side_of: Callable[[exp.Column], int],
    field_of: Callable[[exp.Column], str],
) -> PairPredicate | None:
    """The predicate ``fn(left, right)`` of the AND of ``terms``; None when there are none.

    Args:
        terms: the residual ``ON`` terms.
        side_of: a column's side (0 left, 1 right).
        field_of: a column's field in its record (refusing an unknown column).

    Returns:
        TRUE-only predicate of the pair, or None.
    """
    if not terms:
        return None
    compiler = Compiler(lambda c: f"{side_of(c)}:{field_of(c)}")
    tests = [compiler.predicate(t) for t in terms]

    def holds(left: Any, right: Any) -> bool:
        pair = _Pair(left, right)
        return all(test(pair) for test in tests)

    return holds
