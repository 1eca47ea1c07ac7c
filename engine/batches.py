"""Column batches: what a ``map_batch`` or ``filter_batch`` function gets and gives.

A batch is a ``dict`` from field name to a one-dimensional numpy array, every array as long as
the batch has records, in arrival order. No pandas, no pyarrow: numpy is a core dependency.

- A field whose values are all ints (within int64) is an ``int64`` array; all floats, a
  ``float64`` array; all bools, a ``bool`` array.
- Any other field (strings, a mix of types, a field some records lack or hold ``null``) is an
  ``object`` array of the decoded values, with ``None`` where the value is missing or null.
- The fields are those of any record in the batch, in first-seen order.

``map_batch(fn)``: ``fn(batch)`` returns a dict of columns (numpy arrays, lists or tuples), each
as long as the batch; output record ``i`` is the dict of every column's ``i``-th value (numpy
scalars become Python's), and keeps input record ``i``'s event time. ``filter_batch(fn)``:
``fn(batch)`` returns a boolean array (or list) as long as the batch; the records where it is
true pass on unchanged.

The batch boundaries are the runtime's choice (``weir run --batch-size``, the source, the
columnar loop), so a function must treat rows independently: the same record must give the
same output in any batch. A batch whose function raises is run again a record at a time, and
the records it still raises on go to the dead letters with the reason.

Example:
    >>> import numpy as np
    >>> batch = to_batch([{"v": 1, "s": "a"}, {"v": 2}])
    >>> batch["v"].dtype, batch["s"].tolist()
    (dtype('int64'), ['a', None])
    >>> from_batch({"v": batch["v"] * 10}, 2, "map_batch")
    [{'v': 10}, {'v': 20}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Batch = dict[str, Any]  # field name -> one-dimensional numpy array
_TYPED = {int: np.int64, float: np.float64, bool: np.bool_}


def to_batch(recs: Sequence[Any]) -> Batch:
    """``recs`` (dicts) as a batch of columns (see the module docstring).

    Raises:
        TypeError: a record is not a dict.
    """
    names: dict[str, None] = {}
    for r in recs:
        if type(r) is not dict:
            raise TypeError(f"a batch function needs records that are objects, got {_kind(r)}")
        names.update(dict.fromkeys(r))
    return {name: _column([r.get(name) for r in recs]) for name in names}


def _column(values: list[Any]) -> Any:
    kinds = set(map(type, values))
    if len(kinds) == 1:
        dtype = _TYPED.get(next(iter(kinds)))
        if dtype is not None:
            try:
                return np.array(values, dtype=dtype)
            except OverflowError:  # an int past int64: kept as the Python int it is
                pass
    return np.fromiter(values, dtype=object, count=len(values))


def from_batch(out: object, n: int, kind: str) -> list[dict[str, Any]]:
    """The records of a ``map_batch`` function's result ``out`` for a batch of ``n``.

    Raises:
        TypeError: ``out`` is not a dict of columns.
        ValueError: a column is not one-dimensional or not ``n`` long.
    """
    if not isinstance(out, Mapping):
        raise TypeError(
            f"{kind}'s function returned {_kind(out)}; return a dict of columns, e.g. "
            "{**batch, 'total': batch['price'] * batch['qty']}"
        )
    names: list[str] = []
    columns: list[list[Any]] = []
    for name, column in out.items():
        if not isinstance(name, str):
            raise TypeError(f"{kind}'s function returned a column named {name!r}; use a str")
        names.append(name)
        columns.append(_values(column, n, f"{kind}'s column {name!r}"))
    if not names:
        return [{} for _ in range(n)]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def mask_of(out: object, n: int) -> list[bool]:
    """A ``filter_batch`` function's result ``out`` for a batch of ``n``, as a list of bools.

    Raises:
        TypeError: ``out`` is not booleans.
        ValueError: it is not one-dimensional or not ``n`` long.
    """
    arr = np.asarray(out)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"filter_batch's function returned {arr.dtype} values; return booleans, one per "
            "record (e.g. batch['value'] > 10)"
        )
    keep: list[bool] = _values(arr, n, "filter_batch's mask")
    return keep


def _values(column: object, n: int, what: str) -> list[Any]:
    if isinstance(column, np.ndarray):
        if column.ndim != 1:
            raise ValueError(f"{what} has shape {column.shape}; return one value per record")
        values: list[Any] = column.tolist()
        if column.dtype == object:  # numpy scalars an object column may hold: Python's
            values = [v.item() if isinstance(v, np.generic) else v for v in values]
    elif isinstance(column, list | tuple):
        values = [v.item() if isinstance(v, np.generic) else v for v in column]
    else:
        raise TypeError(f"{what} is {_kind(column)}; return a numpy array or a list")
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} values for a batch of {n} records")
    return values


def _kind(v: object) -> str:
    return type(v).__name__
