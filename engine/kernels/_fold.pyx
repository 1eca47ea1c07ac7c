# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``fold.py``: count/sum/min/max/mean into one window's accumulator arrays,
indexed by dense key id, with a dirty list.

A sum slot is an ``int64`` until a float arrives (then a ``double``, converted and added in
arrival order, as Python's ``int + float`` does); an ``int64`` add that would overflow leaves the
slot to Python ints (``PY``): the kernel returns that row, and every later row of that key, for
``fold.fold_window`` to add with Python's unbounded ints.
"""

import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memset

from weir.engine.kernels.fold import KINDS, check_kinds

cdef extern from *:
    """
    static inline int w_cmp_id(long long i, double d) {
        /* i against d (never NaN: JSON has none), exactly, as Python compares int and float */
        if (d >= 9223372036854775808.0) return -1;
        if (d < -9223372036854775808.0) return 1;
        long long t = (long long)d;
        if (i < t) return -1;
        if (i > t) return 1;
        double frac = d - (double)t;
        return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
    }
    """
    int cmp_id "w_cmp_id"(long long i, double d) nogil
    bint add_overflows "__builtin_saddll_overflow"(long long a, long long b, long long *r) nogil

DEF MAX_AGGS = 16
cdef enum:
    EMPTY = 0
    INT = 1
    FLOAT = 2
    PY = 3
    K_COUNT = 0
    K_SUM = 1
    K_MIN = 2
    K_MAX = 3
    K_MEAN = 4
    TAG_FLOAT = 5


cdef inline int less(uint8_t ak, int64_t ai, double af, uint8_t bk, int64_t bi, double bf) noexcept nogil:
    """Is a < b, a and b each an int (INT) or a float (FLOAT)?"""
    if ak == INT and bk == INT:
        return ai < bi
    if ak == FLOAT and bk == FLOAT:
        return af < bf
    if ak == INT:
        return cmp_id(ai, bf) < 0
    return cmp_id(bi, af) > 0


cdef class WindowAcc:
    """See ``fold.WindowAcc``."""

    cdef int naggs
    cdef int kind[MAX_AGGS]
    cdef uint8_t *vk[MAX_AGGS]
    cdef int64_t *vi[MAX_AGGS]
    cdef double *vf[MAX_AGGS]
    cdef int64_t *cnt[MAX_AGGS]
    cdef uint8_t *present
    cdef uint8_t *dirty_flag
    cdef int32_t *dirty_ids
    cdef Py_ssize_t ndirty, cap
    cdef readonly tuple kinds
    cdef public list py

    def __cinit__(self, tuple kinds):
        check_kinds(kinds)
        if len(kinds) > MAX_AGGS:
            raise ValueError(f"{len(kinds)} aggregates in one window; at most {MAX_AGGS}")
        self.kinds = kinds
        self.naggs = len(kinds)
        self.py = [{} for _ in kinds]
        cdef int j
        for j in range(self.naggs):
            self.kind[j] = KINDS.index(kinds[j])
            self.vk[j] = NULL
            self.vi[j] = NULL
            self.vf[j] = NULL
            self.cnt[j] = NULL
        self.present = NULL
        self.dirty_flag = NULL
        self.dirty_ids = NULL
        self.cap = 0
        self.ndirty = 0
        self._grow(1024)

    def __dealloc__(self):
        cdef int j
        for j in range(self.naggs):
            free(self.vk[j])
            free(self.vi[j])
            free(self.vf[j])
            free(self.cnt[j])
        free(self.present)
        free(self.dirty_flag)
        free(self.dirty_ids)

    cdef void* _more(self, void *p, Py_ssize_t width, Py_ssize_t cap) except NULL:
        cdef char *q = <char *>realloc(p, cap * width)
        if q == NULL:
            raise MemoryError()
        memset(q + self.cap * width, 0, (cap - self.cap) * width)
        return q

    cdef int _grow(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(self.cap, 1024)
        while cap < need:
            cap *= 2
        if cap == self.cap:
            return 0
        cdef int j
        for j in range(self.naggs):
            if self.kind[j] != K_COUNT:
                self.vk[j] = <uint8_t *>self._more(self.vk[j], 1, cap)
                self.vi[j] = <int64_t *>self._more(self.vi[j], 8, cap)
                self.vf[j] = <double *>self._more(self.vf[j], 8, cap)
            if self.kind[j] == K_COUNT or self.kind[j] == K_MEAN:
                self.cnt[j] = <int64_t *>self._more(self.cnt[j], 8, cap)
        self.present = <uint8_t *>self._more(self.present, 1, cap)
        self.dirty_flag = <uint8_t *>self._more(self.dirty_flag, 1, cap)
        self.dirty_ids = <int32_t *>self._more(self.dirty_ids, 4, cap)
        self.cap = cap
        return 0

    def fold(self, const int32_t[::1] kids, list columns):
        """See ``fold.WindowAcc.fold``."""
        cdef Py_ssize_t n = kids.shape[0], i
        cdef int j, nj = self.naggs, kd
        cdef const uint8_t *tg[MAX_AGGS]
        cdef const int64_t *ci[MAX_AGGS]
        cdef const double *cf[MAX_AGGS]
        cdef const uint8_t[::1] mt
        cdef const int64_t[::1] mi
        cdef const double[::1] mf
        if len(columns) != nj:
            raise ValueError(f"{len(columns)} value columns for {nj} aggregates")
        if n == 0:
            return np.empty(0, np.int32), np.empty(0, np.int64)
        for j in range(nj):
            if self.kind[j] == K_COUNT:
                tg[j] = NULL
                ci[j] = NULL
                cf[j] = NULL
                continue
            mt, mi, mf = columns[j]
            if mt.shape[0] != n or mi.shape[0] != n or mf.shape[0] != n:
                raise ValueError(f"value column {j} has not {n} rows")
            tg[j] = &mt[0]
            ci[j] = &mi[0]
            cf[j] = &mf[0]
        cdef int32_t top = -1
        for i in range(n):
            if kids[i] > top:
                top = kids[i]
            if kids[i] < 0:
                raise ValueError(f"key id {kids[i]} is negative")
        self._grow(<Py_ssize_t>top + 1)
        left_aggs = []
        left_rows = []
        cdef int32_t k
        cdef uint8_t vk, first
        cdef long long r
        cdef bint is_f, take
        for i in range(n):
            k = kids[i]
            first = not self.present[k]
            self.present[k] = 1
            if not self.dirty_flag[k]:
                self.dirty_flag[k] = 1
                self.dirty_ids[self.ndirty] = k
                self.ndirty += 1
            for j in range(nj):
                kd = self.kind[j]
                if kd == K_COUNT:
                    self.cnt[j][k] += 1
                    continue
                if kd == K_MEAN:
                    self.cnt[j][k] += 1
                is_f = tg[j][i] == TAG_FLOAT
                if first:
                    self.vk[j][k] = FLOAT if is_f else INT
                    self.vi[j][k] = ci[j][i]
                    self.vf[j][k] = cf[j][i]
                    continue
                vk = self.vk[j][k]
                if kd == K_SUM or kd == K_MEAN:
                    if vk == PY:
                        left_aggs.append(j)
                        left_rows.append(i)
                    elif vk == INT and not is_f:
                        if add_overflows(self.vi[j][k], ci[j][i], &r):
                            self.vk[j][k] = PY
                            left_aggs.append(j)
                            left_rows.append(i)
                        else:
                            self.vi[j][k] = r
                    elif vk == INT:
                        self.vf[j][k] = <double>self.vi[j][k] + cf[j][i]
                        self.vk[j][k] = FLOAT
                    elif is_f:
                        self.vf[j][k] += cf[j][i]
                    else:
                        self.vf[j][k] += <double>ci[j][i]
                else:
                    if kd == K_MIN:
                        take = less(FLOAT if is_f else INT, ci[j][i], cf[j][i],
                                    vk, self.vi[j][k], self.vf[j][k])
                    else:
                        take = less(vk, self.vi[j][k], self.vf[j][k],
                                    FLOAT if is_f else INT, ci[j][i], cf[j][i])
                    if take:
                        self.vk[j][k] = FLOAT if is_f else INT
                        self.vi[j][k] = ci[j][i]
                        self.vf[j][k] = cf[j][i]
        return np.array(left_aggs, np.int32), np.array(left_rows, np.int64)

    cdef object _value(self, int j, int32_t k):
        if self.vk[j][k] == FLOAT:
            return self.vf[j][k]
        if self.vk[j][k] == PY:
            return self.py[j][k]
        return self.vi[j][k]

    def slots(self, Py_ssize_t kid):
        """See ``fold.WindowAcc.slots``."""
        if not 0 <= kid < self.cap or not self.present[kid]:
            return None
        out = []
        cdef int j
        for j in range(self.naggs):
            if self.kind[j] == K_COUNT:
                out.append(self.cnt[j][kid])
            elif self.kind[j] == K_MEAN:
                out.append(self._value(j, kid))
                out.append(self.cnt[j][kid])
            else:
                out.append(self._value(j, kid))
        return out

    def python_start(self, int j, Py_ssize_t kid):
        """The int64 a slot held when it overflowed (``fold_window`` goes on from it)."""
        return self.vi[j][kid]

    def take_dirty(self):
        """See ``fold.WindowAcc.take_dirty``."""
        out = np.empty(self.ndirty, np.int32)
        cdef int32_t[::1] o = out
        cdef Py_ssize_t i
        for i in range(self.ndirty):
            o[i] = self.dirty_ids[i]
            self.dirty_flag[self.dirty_ids[i]] = 0
        self.ndirty = 0
        return out

    def export(self):
        """See ``fold.WindowAcc.export``."""
        cdef Py_ssize_t cap = self.cap
        ids = np.flatnonzero(np.asarray(<uint8_t[:cap]> self.present)).astype(np.int32)
        slots = []
        objects = {}
        cdef int j
        for j in range(self.naggs):
            if self.kind[j] != K_COUNT:
                kinds = np.asarray(<uint8_t[:cap]> self.vk[j])[ids]
                tags = np.where(kinds == FLOAT, 5, np.where(kinds == PY, 7, 4)).astype(np.uint8)
                for row in np.flatnonzero(kinds == PY).tolist():
                    objects[(len(slots), row)] = self.py[j][int(ids[row])]
                slots.append((
                    tags,
                    np.asarray(<int64_t[:cap]> self.vi[j])[ids],
                    np.asarray(<double[:cap]> self.vf[j])[ids],
                ))
            if self.kind[j] == K_COUNT or self.kind[j] == K_MEAN:
                counts = np.asarray(<int64_t[:cap]> self.cnt[j])[ids]
                slots.append((np.full(len(ids), 4, np.uint8), counts, np.zeros(len(ids))))
        return ids, slots, objects

    def present_ids(self):
        """See ``fold.WindowAcc.present_ids``."""
        cdef Py_ssize_t i
        return np.array([i for i in range(self.cap) if self.present[i]], np.int32)
