"""The fold kernel's pure-Python twin (``_fold.pyx``) and what both share.

A ``WindowAcc`` holds one window's accumulators of the keys folded into it, by each key's dense
id (``intern.Interner``), in the order the keys first arrived (a dict's order). ``fold`` adds a
batch of rows; the rows' value columns are the scanner's ``(tags, i64, f64)`` triples
(``scan``): a row whose tag is ``FLOAT`` holds a float in ``f64``, any other an int in ``i64``.
``slots(kid)`` gives the accumulator exactly as ``operators.fold.FoldPlan`` builds it
(``[count, sum, ...]``; ``mean`` is ``[sum, count]``), so the two can be compared value for
value and type for type; ``load`` sets one from such a list (a restored window, or a row the
Python fold took).

Exactness: sums and means add in arrival order with Python's rules (``int + int`` exact,
``int + float`` and ``float + int`` in double precision), min and max compare ints and floats
exactly and keep the first of equals. The compiled twin keeps ``int64`` sums and returns the rows
whose add would overflow (and every later row of that key), and the rows of a slot ``load`` set
past int64; ``fold_window`` folds those with Python ints, in ``py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any
KINDS = (
    "count",
    "sum",
    "min",
    "max",
    "mean",
    # SQL's rule (``agg``'s ``nulls="skip"``): a NULL input (absent or null) passes over the
    # aggregate; ``count_nn`` is ``count(x)``, the non-NULL values; a ``*_skip`` slot is None
    # until its first non-NULL value, a ``mean_skip``'s sum starts at int 0
    "count_nn",
    "sum_skip",
    "min_skip",
    "max_skip",
    "mean_skip",
)
BASE = {k: k.split("_")[0] for k in KINDS}  # what the aggregate does with a value
SKIPS = frozenset(k for k in KINDS if "_" in k)
TAG_NULL = 1  # scan.NULL (scan.ABSENT is 0)
TAG_FLOAT = 5  # scan.FLOAT


def check_kinds(kinds: tuple[str, ...]) -> None:
    """Raises:
    ValueError: a kind is not one of ``KINDS``."""
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"aggregate kind {k!r} has no fold kernel; use one of {KINDS}")


def _number(tag: int, i: int, f: float) -> int | float:
    return f if tag == TAG_FLOAT else i


class WindowAcc:
    """One window's accumulators, by dense key id (the pure-Python twin).

    Args:
        kinds: one aggregate kind per slot group, from ``KINDS``.

    Example:
        >>> acc = WindowAcc(("count", "sum"))
        >>> t, i, f = np.array([4, 4], np.uint8), np.array([2, 3]), np.array([0.0, 0.0])
        >>> acc.fold(np.array([7, 7], np.int32), [None, (t, i, f)]) is None
        True
        >>> acc.slots(7)
        [2, 5]
    """

    def __init__(self, kinds: tuple[str, ...]) -> None:
        check_kinds(kinds)
        self.kinds = kinds
        self.py: list[dict[int, Any]] = [{} for _ in kinds]
        self._acc: dict[int, list[Any]] = {}
        self._dirty: dict[int, None] = {}

    def __len__(self) -> int:
        return len(self._acc)

    def fold(self, kids: Array, columns: list[Any]) -> tuple[Array, Array] | None:
        """Add rows ``kids[i]`` with their values (``columns[j]``: ``(tags, i64, f64)`` for
        aggregate ``j``, ``None`` for a count).

        Returns:
            ``(aggs, rows)``: the (aggregate, row) pairs left to ``fold_window``, or None when
            it left none (always, here).

        Raises:
            ValueError: a column's length or the number of columns is wrong.
        """
        if len(columns) != len(self.kinds):
            raise ValueError(f"{len(columns)} value columns for {len(self.kinds)} aggregates")
        n = len(kids)
        vals: list[list[int | float] | None] = []
        for kind, col in zip(self.kinds, columns, strict=True):
            if kind == "count":
                vals.append(None)
                continue
            tags, i64, f64 = col
            if not len(tags) == len(i64) == len(f64) == n:
                raise ValueError(f"value column has not {n} rows")
            vals.append(list(map(_number, tags.tolist(), i64.tolist(), f64.tolist())))
        acc, dirty = self._acc, self._dirty
        nulls: list[list[bool]] = [
            [] if col is None else (col[0] <= TAG_NULL).tolist() for col in columns
        ]
        for i, k in enumerate(kids.tolist()):
            if k < 0:
                raise ValueError(f"key id {k} is negative")
            dirty[k] = None
            a = acc.get(k)
            first = a is None
            if a is None:
                a = acc[k] = [self._empty(kind) for kind in self.kinds]
            for j, kind in enumerate(self.kinds):
                if kind in SKIPS and nulls[j][i]:  # SQL's rule: a NULL passes over
                    continue
                base = BASE[kind]
                if base == "count":
                    a[j][0] += 1
                    continue
                col = vals[j]
                assert col is not None  # only a count has no column
                v = col[i]
                if base == "mean":
                    a[j][1] += 1
                if first or a[j][0] is None:
                    a[j][0] = v  # the first value (a skipping slot's first non-NULL one)
                elif base in ("sum", "mean"):
                    a[j][0] += v
                elif base == "min":
                    if v < a[j][0]:
                        a[j][0] = v
                elif v > a[j][0]:
                    a[j][0] = v
        return None

    @staticmethod
    def _empty(kind: str) -> list[Any]:
        """A new key's slots of one aggregate before its first row: a count 0, a skipping
        slot NULL, a skipping mean ``[0, 0]`` (the others are set by the first row)."""
        if BASE[kind] == "mean":
            return [0, 0]
        return [0] if BASE[kind] == "count" or kind not in SKIPS else [None]

    def slots(self, kid: int) -> list[Any] | None:
        """Key ``kid``'s accumulator in ``FoldPlan``'s layout (None: no row yet)."""
        a = self._acc.get(kid)
        return None if a is None else [x for group in a for x in group]

    def load(self, kid: int, slots: list[Any], dirty: bool = False) -> None:
        """Set key ``kid``'s accumulator to ``slots`` (``FoldPlan``'s layout), adding the key
        when it has none; ``dirty``: count it as changed.

        Raises:
            ValueError: ``kid`` is negative.
        """
        if kid < 0:
            raise ValueError(f"key id {kid} is negative")
        out: list[list[Any]] = []
        pos = 0
        for kind in self.kinds:
            width = 2 if BASE[kind] == "mean" else 1
            out.append(list(slots[pos : pos + width]))
            pos += width
        self._acc[kid] = out
        if dirty:
            self._dirty.setdefault(kid, None)

    def python_start(self, j: int, kid: int) -> int:
        """Never needed here: this twin's sums are Python ints from the start."""
        raise AssertionError("the pure-Python fold leaves no row to fold_window")

    def take_dirty(self) -> Array:
        """The ids changed since the last call, in order of first change; clears them."""
        out = np.array(list(self._dirty), np.int32)
        self._dirty = {}
        return out

    def export(self) -> tuple[Array, list[Any]]:
        """Every key's accumulator as columns, for firing without a Python call per key.

        Returns:
            ``(ids, columns)``: the ids with an accumulator (``int32``, in the order the keys
            first arrived) and a column per slot of ``slots``' layout, row for row: an
            ``int64`` array where every value is an int64 int, a ``float64`` array where every
            one is a float, else a list of the values (``None`` for NULL, a Python int past
            int64 as itself). The compiled kernel lists a column where a key's slot went to
            Python ints even if its value came back into int64's range: the same values.
        """
        ids = list(self._acc)
        return np.array(ids, np.int32), self._columns(ids)

    def export_rows(self, kids: Array) -> list[Any]:
        """``export``'s columns of the keys ``kids`` alone, in that order.

        Raises:
            KeyError: a key has no accumulator in this window.
        """
        ids = kids.tolist()
        for k in ids:
            if k not in self._acc:
                raise KeyError(f"key id {k} has no accumulator in this window")
        return self._columns(ids)

    def _columns(self, ids: list[int]) -> list[Any]:
        width = sum(2 if BASE[k] == "mean" else 1 for k in self.kinds)
        out: list[Any] = []
        for s in range(width):
            col = [self._acc_slots(k)[s] for k in ids]
            if all(type(v) is int and -(1 << 63) <= v < (1 << 63) for v in col):
                out.append(np.array(col, np.int64))
            elif all(type(v) is float for v in col):
                out.append(np.array(col, np.float64))
            else:
                out.append(col)
        return out

    def _acc_slots(self, kid: int) -> list[Any]:
        return [x for group in self._acc[kid] for x in group]

    def present_ids(self) -> Array:
        """Every id with an accumulator, ascending."""
        return np.array(sorted(self._acc), np.int32)


def fold_window(acc: Any, kids: Array, columns: list[Any]) -> None:
    """Fold rows into ``acc`` (either twin's ``WindowAcc``), then fold the rows its int64 slots
    could not hold with Python ints, in arrival order.

    Args:
        acc: the window's accumulators.
        kids: ``int32`` dense key ids, one per row.
        columns: per aggregate, ``(tags, i64, f64)`` or ``None`` for a count.
    """
    left = acc.fold(kids, columns)
    if left is None:
        return
    aggs, rows = left
    for j, i in zip(aggs.tolist(), rows.tolist(), strict=True):
        tags, i64, f64 = columns[j]
        k = int(kids[i])
        held = acc.py[j]
        if k not in held:
            held[k] = acc.python_start(j, k)
        v = _number(int(tags[i]), int(i64[i]), float(f64[i]))
        kind = BASE[acc.kinds[j]]
        if kind == "min":
            if v < held[k]:
                held[k] = v
        elif kind == "max":
            if v > held[k]:
                held[k] = v
        else:  # sum, mean (the kernel counted the row)
            held[k] += v
