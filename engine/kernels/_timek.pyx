# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``timek.py``: per-record watermarks, window ends and lateness in bulk.

Every intermediate is computed in 128-bit integers, so the floor remainders and sums that
Python computes with unbounded ints come out the same near both ends of the 64-bit range.
"""

import numpy as np

cdef extern from *:
    """
    typedef __int128 w_i128;
    static inline __int128 w_floormod(__int128 a, __int128 m) {
        __int128 r = a % m;
        return (r != 0 && ((r < 0) != (m < 0))) ? r + m : r;
    }
    """
    ctypedef long long i128 "w_i128"
    i128 floormod "w_floormod"(i128 a, i128 m) nogil

ctypedef long long i64

cdef i64 MIN_T = -9223372036854775807 - 1
cdef i64 MAX_T = 9223372036854775807


def watermarks(const i64[::1] ts, object max_seen, object bound_ms):
    """See ``timek.watermarks``."""
    cdef Py_ssize_t n = ts.shape[0], i
    out = np.empty(n, dtype=np.int64)
    cdef i64[::1] wms = out
    cdef i128 running = <i128>(<i64>max_seen)
    cdef i128 shift = <i128>(<i64>bound_ms) + 1
    cdef i128 w
    with nogil:
        for i in range(n):
            w = running - shift
            wms[i] = <i64>(w if w > MIN_T else MIN_T)
            if ts[i] > running:
                running = ts[i]
    return out, int(<i64>running)


def tumbling_ends(const i64[::1] ts, object size_ms, object offset_ms):
    """See ``timek.tumbling_ends``."""
    cdef Py_ssize_t n = ts.shape[0], i
    out = np.empty(n, dtype=np.int64)
    cdef i64[::1] ends = out
    cdef i128 s = <i64>size_ms, o = <i64>offset_ms, t, e
    with nogil:
        for i in range(n):
            t = ts[i]
            e = t - floormod(t - o, s) + s
            ends[i] = <i64>(e if e < MAX_T else MAX_T)
    return out


def sliding_expand(const i64[::1] ts, object size_ms, object slide_ms, object offset_ms):
    """See ``timek.sliding_expand``."""
    cdef Py_ssize_t n = ts.shape[0], i, k
    cdef i128 s = <i64>size_ms, d = <i64>slide_ms, o = <i64>offset_ms, t, start, e
    cdef Py_ssize_t per = <Py_ssize_t>((s + d - 1) // d)
    ends_a = np.empty(n * per, dtype=np.int64)
    origin_a = np.empty(n * per, dtype=np.int64)
    cdef i64[::1] ends = ends_a
    cdef i64[::1] origin = origin_a
    cdef bint saw_max
    k = 0
    with nogil:
        for i in range(n):
            t = ts[i]
            start = t - floormod(t - o, d)
            saw_max = False
            while start > t - s:
                e = start + s
                if e >= MAX_T:
                    # the windows at or past the end of time come first and are one
                    if not saw_max:
                        saw_max = True
                        ends[k] = MAX_T
                        origin[k] = i
                        k += 1
                else:
                    ends[k] = <i64>e
                    origin[k] = i
                    k += 1
                start -= d
    return ends_a[:k], origin_a[:k]


def lateness(const i64[::1] ends, const i64[::1] wms, object allowed_ms):
    """See ``timek.lateness``."""
    cdef Py_ssize_t n = ends.shape[0], i
    out = np.empty(n, dtype=np.uint8)
    cdef unsigned char[::1] codes = out
    cdef i128 L = <i64>allowed_ms, c, e, w
    with nogil:
        for i in range(n):
            e = ends[i]
            w = wms[i]
            if e - 1 > w:
                codes[i] = 0
            else:
                c = e - 1 + L
                if c > MAX_T:
                    c = MAX_T
                codes[i] = 2 if c <= w else 1
    return out
