"""Top-N of a window held as columns (``colwindow``): the same ranking as ``topn.ranked_columns``
(highest value first, ties by key, only finite numbers ranked), found with numpy so that only
the few keys that can rank are named and sorted: a partition finds the ``k``-th highest value,
every key above it ranks, and of the keys equal to it the smallest by key fill the rest. Where
thousands tie (an open window's counts, nearly all 1), their keys' first bytes (``Prefixes``)
pick the few that can fill it before any is named."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from weir.engine.agg import Builtin
from weir.engine.runtime.operators.topn import Ranked, ranked_columns
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.runtime.stored.ranking import TOP_K

Array = Any
Names = Callable[[Array], list[str]]  # key ids -> their keys
# key ids -> their keys' first 8 bytes as big-endian uint64s (``Interner.prefixes``): a key
# sorts no later than any key of a greater prefix
Prefixes = Callable[[Array], Array]


def rank_window(
    names: Names,
    ids: Array,
    plan: FoldPlan,
    columns: list[Any],
    k: int = TOP_K,
    prefixes: Prefixes | None = None,
) -> Ranked:
    """Every aggregate's best ``k`` ``(key, value)`` of a window whose keys are ``ids`` and
    whose slot columns are ``columns`` (``WindowAcc.export``'s); ``prefixes``, where given,
    narrows a large tie before its keys are named."""
    out: Ranked = {}
    every: list[str] | None = None
    rows: list[list[Any]] | None = None
    for name in plan.ranked:
        lo, hi = plan.slices[name]
        agg = plan.aggregates[name]
        plain = isinstance(agg, Builtin) and agg.cast is None
        column = columns[lo] if hi > lo else None
        if plain and hi - lo == 1 and isinstance(column, np.ndarray):
            found = _best_of_array(names, ids, column, k, prefixes)
            if found:
                out[name] = found
            continue
        if every is None:  # a mean, or a column of mixed values: the general ranking
            every = names(ids)
        if plain and hi - lo == 1:
            values = _values(column)
        elif plain and getattr(agg, "kind", "") == "mean" and not getattr(agg, "skips", True):
            values = _means(column, columns[hi - 1])
        else:  # an avg, a skipping mean, a cast: the result's own rule, per key
            if rows is None:
                rows = [list(r) for r in zip(*map(_values, columns), strict=True)]
            values = plan.column(name, rows)
        out.update(ranked_columns(every, {name: values}, k))
    return out


def _values(column: Any) -> list[Any]:
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


def _means(sums: Any, counts: Any) -> list[Any]:
    return [a / b for a, b in zip(_values(sums), _values(counts), strict=True)]


def _best_of_array(
    names: Names, ids: Array, v: Array, k: int, prefixes: Prefixes | None = None
) -> list[tuple[str, Any]]:
    rows = np.arange(len(v))
    if v.dtype.kind == "f":
        finite = np.isfinite(v)
        if not finite.all():
            rows, v = rows[finite], v[finite]
    n = len(v)
    if not n:
        return []
    if n <= k:
        chosen = rows
        values = v.tolist()
    else:
        kth = kth_largest(v, k)
        above = np.flatnonzero(v > kth)
        tied = np.flatnonzero(v == kth)
        room = k - len(above)
        if len(tied) > room:  # of the keys at the k-th value, the smallest by key rank
            if prefixes is not None and len(tied) > _NARROW * room:
                # only a key whose prefix is at most the room-th smallest can be among them
                first = prefixes(ids[rows[tied]])
                tied = tied[first <= np.partition(first, room - 1)[room - 1]]
            tied_names = names(ids[rows[tied]])
            picked = heapq.nsmallest(room, zip(tied_names, tied.tolist(), strict=True))
            tied = np.array([i for _, i in picked], np.int64)
        picks = np.concatenate((above, tied))
        chosen, values = rows[picks], v[picks].tolist()
    keys = names(ids[chosen])
    ranked = sorted(zip([-x for x in values], keys, strict=True))[:k]
    return [(key, -neg) for neg, key in ranked]


_SAMPLE = 4096  # values a threshold is estimated from
_NARROW = 4  # a tie this many times the room left is narrowed by prefix first


def kth_largest(v: Array, k: int) -> Any:
    """The ``k``-th highest of ``v`` (``0 < k < len(v)``, no NaN), the value
    ``np.partition(v, len(v) - k)[len(v) - k]`` is, found without partitioning the whole column:
    numpy's introselect degrades on a column of a few distinct values (a window's counts at 1M
    keys are nearly all 1: 16 ms for 86k values, against 1 ms for distinct ones). A threshold
    from a strided sample splits off the few values above it; only they are partitioned. Where
    the sample misleads (the threshold leaves fewer than ``k`` values at or above it), a sort,
    which takes ties in its stride, decides.

    Example:
        >>> import numpy as np
        >>> kth_largest(np.array([1, 5, 1, 3, 1, 4]), 2)
        4
    """
    n = len(v)
    if n <= _SAMPLE:  # small: partition outright (bounded even when degenerate)
        return np.partition(v, n - k)[n - k].item()
    step = max(1, n // _SAMPLE)
    sample = v[::step]
    m = len(sample)
    # the sample's rank for k, doubled and padded, so the threshold falls below the k-th value
    rank = min(m - 1, 2 * (k * m) // n + 8)
    threshold = np.partition(sample, m - 1 - rank)[m - 1 - rank]
    above = v[v > threshold]
    if len(above) >= k:
        return np.partition(above, len(above) - k)[len(above) - k].item()
    if np.count_nonzero(v >= threshold) >= k:  # the threshold itself is the k-th value
        return threshold.item()
    return np.sort(v)[n - k].item()
