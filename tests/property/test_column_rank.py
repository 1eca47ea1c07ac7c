"""The top-N of a window held as columns (``colrank.rank_window``) against the ranking the query
API and the dict operator use (``topn.ranked_columns``): the same keys and values in the same
order, with heavy ties (ties go by key), non-finite floats and mixed columns."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from weir import agg
from weir.engine.kernels import Kernels
from weir.engine.runtime.operators.colrank import kth_largest, rank_window
from weir.engine.runtime.operators.topn import ranked_columns
from weir.engine.runtime.stored.fold import FoldPlan

PLAN = FoldPlan({"n": agg.count(), "total": agg.sum("v"), "avg": agg.mean("v")})
FLOATS = st.one_of(st.sampled_from([0.0, -0.0, 1.5, float("inf"), -float("inf")]), st.floats())


@given(
    st.lists(st.tuples(st.integers(1, 4), st.one_of(st.integers(-3, 3), FLOATS)), max_size=40),
    st.integers(1, 6),
    st.booleans(),
)
def test_rank_window_equals_ranked_columns(rows: list[tuple[int, Any]], k: int, ints: bool) -> None:
    names = [f"k{i:02d}" for i in range(len(rows))][::-1]  # key order is not id order
    counts = np.array([c for c, _ in rows], np.int64)
    values: Any = [v for _, v in rows]
    if ints:  # an int64 column; otherwise a float64 one, or mixed (a list of Python values)
        values = np.array([v if type(v) is int else 1 for v in values], np.int64)
    elif all(type(v) is float for v in values):
        values = np.array(values, np.float64)
    columns = [counts, values, values, counts]
    ids = np.arange(len(rows), dtype=np.int32)
    got = rank_window(lambda i: [names[x] for x in i.tolist()], ids, PLAN, columns, k)
    # narrowed by the keys' first bytes (the interner's prefixes), the same ranking
    assert got == rank_window(
        lambda i: [names[x] for x in i.tolist()], ids, PLAN, columns, k, _prefixes(names)
    )
    listed = values.tolist() if isinstance(values, np.ndarray) else values
    want = ranked_columns(
        names,
        {
            "n": counts.tolist(),
            "total": listed,
            "avg": [a / b for a, b in zip(listed, counts.tolist(), strict=True)],
        },
        k,
    )
    assert {n: _plain(v) for n, v in got.items()} == {n: _plain(v) for n, v in want.items()}


def _prefixes(names: list[str]) -> Any:
    """``Interner.prefixes`` of keys ``names`` (by id), from their UTF-8 bytes."""

    def of(ids: Any) -> Any:
        raw = [names[x].encode()[:8].ljust(8, b"\0") for x in ids.tolist()]
        return np.array([int.from_bytes(r, "big") for r in raw], np.uint64)

    return of


# keys that share long prefixes, hold NULs (a short key and its NUL-padded twin), or unicode
TIED_KEYS = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.builds(lambda s: "same-prefix" + s, st.text(max_size=3)),
        st.sampled_from(["a", "a\x00", "a\x00\x00", "é", "ab", "\U0001f642"]),
    ),
    min_size=1,
    max_size=200,
    unique=True,
)


@given(TIED_KEYS, st.integers(1, 8), st.data())
def test_a_large_tie_narrowed_by_prefix_ranks_as_the_whole_tie(
    kernels: Kernels, keys: list[str], k: int, data: st.DataObject
) -> None:
    """Nearly every count equal (an open window's): the tie at the k-th value, narrowed by
    the interner's key prefixes first, picks the same smallest keys as the whole tie sorted;
    and ``Interner.prefixes`` is each key's first 8 bytes, big-endian, zero padded."""
    it = kernels.Interner(128)
    raw = [x.encode() for x in keys]
    starts = np.cumsum([0] + [len(r) for r in raw[:-1]]).astype(np.int64)
    ids = it.intern(b"".join(raw), starts, np.array([len(r) for r in raw], np.int32))
    assert it.prefixes(ids).tolist() == _prefixes(keys)(ids).tolist()
    counts = np.ones(len(keys), np.int64)
    for i in data.draw(st.lists(st.integers(0, len(keys) - 1), max_size=3)):
        counts[i] += 1
    columns = [counts, counts, counts, counts]
    names = lambda i: [keys[x] for x in i.tolist()]  # noqa: E731
    got = rank_window(names, ids, PLAN, columns, k, it.prefixes)
    assert got == rank_window(names, ids, PLAN, columns, k)
    assert got["n"] == ranked_columns(keys, {"n": counts.tolist()}, k)["n"]


def _plain(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(k, repr(v)) for k, v in pairs]


@given(
    st.integers(0, 2**32 - 1),
    st.integers(4_097, 40_000),
    st.integers(1, 300),
    st.sampled_from(["few", "distinct", "sorted", "one-heavy", "floats-few"]),
)
def test_kth_largest_equals_the_sorted_columns(seed: int, n: int, k: int, shape: str) -> None:
    """Past the sample size, where the threshold is estimated: the k-th value is the sorted
    column's, whatever the distribution (a few values repeated, distinct ones, a sorted column
    that a strided sample sees unevenly, one value nearly everywhere)."""
    rng = np.random.default_rng(seed)
    v: Any
    if shape == "few":
        v = rng.integers(0, 4, n)
    elif shape == "distinct":
        v = rng.random(n)
    elif shape == "sorted":
        v = np.sort(rng.integers(0, 50, n))
    elif shape == "one-heavy":
        v = np.ones(n, np.int64)
        v[rng.choice(n, min(n, 2 * k), replace=False)] = rng.integers(2, 5, min(n, 2 * k))
    else:
        v = rng.integers(-2, 3, n).astype(np.float64)
    assert kth_largest(v, k) == np.sort(v)[n - k]


def test_the_kth_largest_example_runs() -> None:
    import doctest

    from weir.engine.runtime.operators import colrank

    failed, tried = doctest.testmod(colrank)
    assert failed == 0 and tried > 0
