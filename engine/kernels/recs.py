"""Pure-Python twin of ``_recs.pyx``: fields of decoded records (dicts) as tagged columns.

Where a job's stateless part runs per record (a lambda needs dicts), the keyed side still
folds columns: ``record_columns`` reads the fields the keyed side needs (the key, the
aggregated values) out of the records in one pass, tagged as the scanner tags raw lines
(``scan``): ``ABSENT`` (no such key), ``NULL``, ``FALSE``, ``TRUE``, ``INT`` (an ``int``
within int64, in ``i64``), ``FLOAT`` (in ``f64``), ``STR`` (its length in characters in
``i64``, the str in ``objects``), ``OTHER`` (anything else: an int past int64, a list, a
dict, a subclass of a scalar type; the value in ``objects``). Types are exact, as the dict
path's checks are (``type(v) is int``): a bool is not an int.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.engine.kernels.scan import ABSENT, FALSE, FLOAT, INT, NULL, OTHER, STR, TRUE

Array = Any
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
_ABSENT = object()


def record_columns(
    recs: list[Any], names: tuple[str, ...]
) -> tuple[Array, Array, Array, list[list[Any] | None]]:
    """Fields ``names`` of every record.

    Args:
        recs: the records, each exactly a ``dict``.
        names: the field names.

    Returns:
        ``(tags, i64, f64, objects)``: ``(len(names), len(recs))`` arrays, and per field a
        list holding each ``STR`` and ``OTHER`` row's value (None elsewhere), or None when the
        field has no such row.

    Raises:
        TypeError: a record is not a dict.
    """
    n, nf = len(recs), len(names)
    tags = np.zeros((nf, n), np.uint8)
    i64 = np.zeros((nf, n), np.int64)
    f64 = np.zeros((nf, n), np.float64)
    objects: list[list[Any] | None] = [None] * nf
    for i, r in enumerate(recs):
        if type(r) is not dict:
            raise TypeError(f"record {i} is a {type(r).__name__}, not a dict")
        for j, name in enumerate(names):
            v = r.get(name, _ABSENT)
            t = type(v)
            if v is _ABSENT:
                continue
            if t is int and I64_MIN <= v <= I64_MAX:
                tags[j, i], i64[j, i] = INT, v
                continue
            if t is float:
                tags[j, i], f64[j, i] = FLOAT, v
                continue
            if v is None:
                tags[j, i] = NULL
                continue
            if t is bool:
                tags[j, i] = TRUE if v else FALSE
                continue
            if t is str:
                tags[j, i], i64[j, i] = STR, len(v)
            else:
                tags[j, i] = OTHER
            held = objects[j]
            if held is None:
                held = objects[j] = [None] * n
            held[i] = v
    return tags, i64, f64, objects


__all__ = ["ABSENT", "record_columns"]
