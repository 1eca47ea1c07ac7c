# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``recs.py``: fields of decoded records as tagged columns, one pass in C
(a dict lookup per field and record, with the key's cached hash)."""

import numpy as np
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t

cdef extern from "Python.h":
    PyObject *PyDict_GetItemWithError(object d, object key) except? NULL
    long long PyLong_AsLongLongAndOverflow(object v, int *overflow) except? -1
    double PyFloat_AS_DOUBLE(object v)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)

DEF ABSENT = 0
DEF NULL_TAG = 1
DEF FALSE_TAG = 2
DEF TRUE_TAG = 3
DEF INT = 4
DEF FLOAT = 5
DEF STR = 6
DEF OTHER = 7


def record_columns(list recs, tuple names):
    """See ``recs.record_columns``."""
    cdef Py_ssize_t n = len(recs), nf = len(names), i, j
    tags_a = np.zeros((nf, n), np.uint8)
    i64_a = np.zeros((nf, n), np.int64)
    f64_a = np.zeros((nf, n), np.float64)
    cdef uint8_t[:, ::1] tags = tags_a
    cdef int64_t[:, ::1] i64 = i64_a
    cdef double[:, ::1] f64 = f64_a
    objects = [None] * nf
    cdef PyObject *p
    cdef object r, v, t
    cdef int overflow
    cdef long long x
    for i in range(n):
        r = recs[i]
        if type(r) is not dict:
            raise TypeError(f"record {i} is a {type(r).__name__}, not a dict")
        for j in range(nf):
            p = PyDict_GetItemWithError(r, names[j])
            if p == NULL:
                continue
            v = <object>p
            t = type(v)
            if t is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if not overflow:
                    tags[j, i] = INT
                    i64[j, i] = x
                    continue
                tags[j, i] = OTHER
            elif t is float:
                tags[j, i] = FLOAT
                f64[j, i] = PyFloat_AS_DOUBLE(v)
                continue
            elif v is None:
                tags[j, i] = NULL_TAG
                continue
            elif t is bool:
                tags[j, i] = TRUE_TAG if v is True else FALSE_TAG
                continue
            elif t is str:
                tags[j, i] = STR
                i64[j, i] = PyUnicode_GET_LENGTH(v)
            else:
                tags[j, i] = OTHER
            held = objects[j]
            if held is None:
                held = objects[j] = [None] * n
            held[i] = v
    return tags_a, i64_a, f64_a, objects
