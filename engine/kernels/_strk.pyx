# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``strk.py``: string predicates over a scanned string column."""

import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp

cdef extern from "string.h":
    void *memmem(const void *h, size_t hl, const void *n, size_t nl) nogil

DEF STR = 6
DEF EQ = 0
DEF PREFIX = 1
DEF CONTAINS = 2


cdef object _predicate(const uint8_t[::1] data, const uint8_t[::1] tags,
                       const int64_t[::1] ss, const int32_t[::1] sl, bytes lit, int op):
    cdef Py_ssize_t n = tags.shape[0], i
    out = np.empty(n, np.uint8)
    cdef uint8_t[::1] o = out
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef const char *q = lit
    cdef Py_ssize_t m = len(lit)
    with nogil:
        for i in range(n):
            if tags[i] != STR:
                o[i] = 2
            elif op == EQ:
                o[i] = sl[i] == m and memcmp(base + ss[i], q, m) == 0
            elif op == PREFIX:
                o[i] = sl[i] >= m and memcmp(base + ss[i], q, m) == 0
            else:
                o[i] = m == 0 or (sl[i] >= m and memmem(base + ss[i], sl[i], q, m) != NULL)
    return out


def str_equals(data, tags, ss, sl, bytes lit):
    """See ``strk.str_equals``."""
    return _predicate(data, tags, ss, sl, lit, EQ)


def str_startswith(data, tags, ss, sl, bytes lit):
    """See ``strk.str_startswith``."""
    return _predicate(data, tags, ss, sl, lit, PREFIX)


def str_contains(data, tags, ss, sl, bytes lit):
    """See ``strk.str_contains``."""
    return _predicate(data, tags, ss, sl, lit, CONTAINS)


def str_isin(data, tags, ss, sl, tuple values):
    """See ``strk.str_isin``."""
    out = np.zeros(tags.shape[0], np.uint8)
    out[np.asarray(tags) != STR] = 2
    for v in values:
        out |= str_equals(data, tags, ss, sl, v) == 1
    return out
