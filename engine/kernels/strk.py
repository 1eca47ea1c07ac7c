"""Pure-Python twin of the string predicate kernels (``_strk.pyx``).

Each takes a scanned string column (``scan.Scan``: ``data`` and one field's ``tags``, ``ss``,
``sl`` rows) and answers per row ``1`` (true), ``0`` (false) or ``2`` (the row holds no string:
the expression evaluator decides what that means).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Array = Any
STR = 6


def _each(data: bytes, tags: Array, ss: Array, sl: Array, test: Callable[[bytes], bool]) -> Array:
    out = [
        (1 if test(data[s : s + n]) else 0) if t == STR else 2
        for t, s, n in zip(tags.tolist(), ss.tolist(), sl.tolist(), strict=True)
    ]
    return np.array(out, np.uint8)


def str_equals(data: bytes, tags: Array, ss: Array, sl: Array, lit: bytes) -> Array:
    """Is each string equal to ``lit`` (UTF-8)?"""
    return _each(data, tags, ss, sl, lit.__eq__)


def str_startswith(data: bytes, tags: Array, ss: Array, sl: Array, lit: bytes) -> Array:
    """Does each string start with ``lit``?"""
    return _each(data, tags, ss, sl, lambda b: b.startswith(lit))


def str_contains(data: bytes, tags: Array, ss: Array, sl: Array, lit: bytes) -> Array:
    """Does each string contain ``lit``? (UTF-8 is self-synchronising, so a byte match is a
    character match.)"""
    return _each(data, tags, ss, sl, lambda b: lit in b)


def str_isin(data: bytes, tags: Array, ss: Array, sl: Array, values: tuple[bytes, ...]) -> Array:
    """Is each string one of ``values``?"""
    wanted = frozenset(values)
    return _each(data, tags, ss, sl, wanted.__contains__)
