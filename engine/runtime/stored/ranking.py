"""Ranking for top-N: highest value first, ties by key, so the sort key of an entry is
``(-value, key)``, a total order, and the global top N is exactly the best N of the union of every
worker's own top N (keys are partitioned across workers). The workers keep their candidates
(``operators/topn.py``); the query API merges what they report with the same functions.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import compress, repeat
from math import isfinite
from operator import ge, neg
from typing import Any

TOP_K = 100
Rank = tuple[float, str]

_NUMBERS = (int, float)
_NUMBER_SET = frozenset(_NUMBERS)
_INF = float("inf")


def finite_number(v: Any) -> bool:
    """A finite int or float (bools are not numbers here, nor NaN or infinities, which JSON
    cannot carry to an API process). Exact type checks: this runs for every changed key and
    aggregate at each flush."""
    return type(v) in _NUMBERS and -_INF < v < _INF


def best(entries: Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The ``k`` best ``(key, value)`` pairs: highest value first, ties by key (ranked as
    ``(-value, key)`` tuples: no key function call per entry)."""
    return [(key, -v) for v, key in heapq.nsmallest(k, ((-v, key) for key, v in entries))]


def all_finite(values: list[Any]) -> bool:
    """Is every value a finite int or float (``finite_number``), checked a column at a time?"""
    types = set(map(type, values))
    if not types <= _NUMBER_SET:
        return False
    try:
        return float not in types or all(map(isfinite, values))
    except OverflowError:  # an int too large for a float is still finite
        return all(map(finite_number, values))


def best_of_column(keys: list[str], values: list[Any], k: int) -> list[tuple[str, float]]:
    """``best(zip(keys, values), k)`` for a column of finite numbers."""
    return [(key, -v) for v, key in best_ranks(keys, values, k)]


def best_ranks(keys: list[str], values: list[Any], k: int) -> list[Rank]:
    """The ``k`` smallest ``(-value, key)`` ranks of a column of finite numbers: the ``k``-th
    highest value bounds what can rank, so only the few keys at or above it are paired and
    sorted."""
    if not values:
        return []
    floor = heapq.nlargest(k, values)[-1]
    mask = list(map(ge, values, repeat(floor)))
    top = zip(map(neg, compress(values, mask)), compress(keys, mask), strict=True)
    return sorted(top)[:k]
