# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``fold.py``: count/sum/min/max/mean into one window's accumulator arrays,
with a dirty list.

The arrays are the window's own: a key gets a slot of the window the first time a row of it is
folded there (``slot_of``, by the operator-wide key id), so a window of a few keys costs a few
slots however many keys the operator has seen, and a window's keys come out in the order they
first arrived (a dict's order, as the Python fold keeps them).

A sum slot is an ``int64`` until a float arrives (then a ``double``, converted and added in
arrival order, as Python's ``int + float`` does); an ``int64`` add that would overflow leaves the
slot to Python ints (``PY``): the kernel returns that row, and every later row of that key, for
``fold.fold_window`` to add with Python's unbounded ints. A slot ``load`` sets to an int past
int64 (a restored or Python-folded value) is ``PY`` too, for every kind.
"""

import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, realloc
from libc.string cimport memset

from weir.engine.kernels.fold import BASE, KINDS, SKIPS, check_kinds

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
    TAG_NULL = 1
    TAG_FLOAT = 5

cdef int64_t I64_MIN = -9223372036854775807 - 1
cdef int64_t I64_MAX = 9223372036854775807


cdef inline int less(uint8_t ak, int64_t ai, double af, uint8_t bk, int64_t bi, double bf) noexcept nogil:
    """Is a < b, a and b each an int (INT) or a float (FLOAT)?"""
    if ak == INT and bk == INT:
        return ai < bi
    if ak == FLOAT and bk == FLOAT:
        return af < bf
    if ak == INT:
        return cmp_id(ai, bf) < 0
    return cmp_id(bi, af) > 0


cdef void* _more(void *p, Py_ssize_t width, Py_ssize_t old, Py_ssize_t cap, int fill) except NULL:
    cdef char *q = <char *>realloc(p, cap * width)
    if q == NULL:
        raise MemoryError()
    memset(q + old * width, fill, (cap - old) * width)
    return q


cdef class WindowAcc:
    """See ``fold.WindowAcc``."""

    cdef int naggs
    cdef int kind[MAX_AGGS]  # the base kind (``fold.BASE``)
    cdef bint skip[MAX_AGGS]  # a NULL (absent or null) input passes over this aggregate
    cdef uint8_t *vk[MAX_AGGS]
    cdef int64_t *vi[MAX_AGGS]
    cdef double *vf[MAX_AGGS]
    cdef int64_t *cnt[MAX_AGGS]
    cdef int32_t *slot_of  # key id -> the window's slot, -1: none
    cdef Py_ssize_t kcap
    cdef int32_t *kid_of  # slot -> key id
    cdef uint8_t *dirty_flag
    cdef int32_t *dirty_slots
    cdef Py_ssize_t n, ndirty, cap
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
            self.kind[j] = KINDS.index(BASE[kinds[j]])
            self.skip[j] = kinds[j] in SKIPS
            self.vk[j] = NULL
            self.vi[j] = NULL
            self.vf[j] = NULL
            self.cnt[j] = NULL
        self.slot_of = NULL
        self.kid_of = NULL
        self.dirty_flag = NULL
        self.dirty_slots = NULL
        self.kcap = 0
        self.cap = 0
        self.n = 0
        self.ndirty = 0
        self._grow(64)

    def __dealloc__(self):
        cdef int j
        for j in range(self.naggs):
            free(self.vk[j])
            free(self.vi[j])
            free(self.vf[j])
            free(self.cnt[j])
        free(self.slot_of)
        free(self.kid_of)
        free(self.dirty_flag)
        free(self.dirty_slots)

    def __len__(self):
        return self.n

    cdef int _grow(self, Py_ssize_t need) except -1:
        """Room for ``need`` slots."""
        cdef Py_ssize_t cap = max(self.cap, 64), old = self.cap
        while cap < need:
            cap *= 2
        if cap == old:
            return 0
        cdef int j
        for j in range(self.naggs):
            if self.kind[j] != K_COUNT:
                self.vk[j] = <uint8_t *>_more(self.vk[j], 1, old, cap, 0)
                self.vi[j] = <int64_t *>_more(self.vi[j], 8, old, cap, 0)
                self.vf[j] = <double *>_more(self.vf[j], 8, old, cap, 0)
            if self.kind[j] == K_COUNT or self.kind[j] == K_MEAN:
                self.cnt[j] = <int64_t *>_more(self.cnt[j], 8, old, cap, 0)
        self.kid_of = <int32_t *>_more(self.kid_of, 4, old, cap, 0)
        self.dirty_flag = <uint8_t *>_more(self.dirty_flag, 1, old, cap, 0)
        self.dirty_slots = <int32_t *>_more(self.dirty_slots, 4, old, cap, 0)
        self.cap = cap
        return 0

    cdef int _reach(self, int32_t top) except -1:
        """``slot_of`` covers key ids up to ``top``."""
        cdef Py_ssize_t kcap = max(self.kcap, 1024)
        if top < self.kcap:
            return 0
        while kcap <= top:
            kcap *= 2
        self.slot_of = <int32_t *>_more(self.slot_of, 4, self.kcap, kcap, 0xFF)  # -1: none
        self.kcap = kcap
        return 0

    cdef inline int32_t _slot(self, int32_t k) except -1:
        """Key ``k``'s slot, made now if it has none (``slot_of`` must cover ``k``)."""
        cdef int32_t s = self.slot_of[k]
        if s >= 0:
            return s
        if self.n == self.cap:
            self._grow(self.n + 1)
        s = <int32_t>self.n
        self.n += 1
        self.slot_of[k] = s
        self.kid_of[s] = k
        return s

    cdef inline void _touch(self, int32_t s) noexcept:
        if not self.dirty_flag[s]:
            self.dirty_flag[s] = 1
            self.dirty_slots[self.ndirty] = s
            self.ndirty += 1

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
            return None
        for j in range(nj):
            if self.kind[j] == K_COUNT and not self.skip[j]:
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
        self._reach(top)
        left_aggs = None
        left_rows = None
        cdef int32_t k, s
        cdef uint8_t vk
        cdef bint first
        cdef long long r
        cdef bint is_f, take
        for i in range(n):
            k = kids[i]
            first = self.slot_of[k] < 0
            s = self._slot(k)
            self._touch(s)
            for j in range(nj):
                kd = self.kind[j]
                if self.skip[j] and tg[j][i] <= TAG_NULL:  # SQL's rule: NULL passes over
                    if first and kd == K_MEAN:  # a skipping mean's sum starts at int 0
                        self.vk[j][s] = INT
                        self.vi[j][s] = 0
                    continue
                if kd == K_COUNT:
                    self.cnt[j][s] += 1
                    continue
                if kd == K_MEAN:
                    self.cnt[j][s] += 1
                is_f = tg[j][i] == TAG_FLOAT
                if first or self.vk[j][s] == EMPTY:  # EMPTY: a skipping slot still NULL
                    self.vk[j][s] = FLOAT if is_f else INT
                    self.vi[j][s] = ci[j][i]
                    self.vf[j][s] = cf[j][i]
                    continue
                vk = self.vk[j][s]
                if vk == PY:
                    if left_aggs is None:
                        left_aggs, left_rows = [], []
                    left_aggs.append(j)
                    left_rows.append(i)
                elif kd == K_SUM or kd == K_MEAN:
                    if vk == INT and not is_f:
                        if add_overflows(self.vi[j][s], ci[j][i], &r):
                            self.vk[j][s] = PY
                            if left_aggs is None:
                                left_aggs, left_rows = [], []
                            left_aggs.append(j)
                            left_rows.append(i)
                        else:
                            self.vi[j][s] = r
                    elif vk == INT:
                        self.vf[j][s] = <double>self.vi[j][s] + cf[j][i]
                        self.vk[j][s] = FLOAT
                    elif is_f:
                        self.vf[j][s] += cf[j][i]
                    else:
                        self.vf[j][s] += <double>ci[j][i]
                else:
                    if kd == K_MIN:
                        take = less(FLOAT if is_f else INT, ci[j][i], cf[j][i],
                                    vk, self.vi[j][s], self.vf[j][s])
                    else:
                        take = less(vk, self.vi[j][s], self.vf[j][s],
                                    FLOAT if is_f else INT, ci[j][i], cf[j][i])
                    if take:
                        self.vk[j][s] = FLOAT if is_f else INT
                        self.vi[j][s] = ci[j][i]
                        self.vf[j][s] = cf[j][i]
        if left_aggs is None:
            return None
        return np.array(left_aggs, np.int32), np.array(left_rows, np.int64)

    cdef object _value(self, int j, int32_t s):
        if self.vk[j][s] == EMPTY:
            return None
        if self.vk[j][s] == FLOAT:
            return self.vf[j][s]
        if self.vk[j][s] == PY:
            return self.py[j][self.kid_of[s]]
        return self.vi[j][s]

    cdef int32_t _find(self, Py_ssize_t kid):
        if not 0 <= kid < self.kcap:
            return -1
        return self.slot_of[kid]

    def slots(self, Py_ssize_t kid):
        """See ``fold.WindowAcc.slots``."""
        cdef int32_t s = self._find(kid)
        if s < 0:
            return None
        out = []
        cdef int j
        for j in range(self.naggs):
            if self.kind[j] == K_COUNT:
                out.append(self.cnt[j][s])
            elif self.kind[j] == K_MEAN:
                out.append(self._value(j, s))
                out.append(self.cnt[j][s])
            else:
                out.append(self._value(j, s))
        return out

    cdef void _set(self, int j, int32_t s, object v) except *:
        """Value slot ``j`` of slot ``s`` from a Python int or float, or None (a skipping
        aggregate that saw only NULLs)."""
        if v is None:
            self.vk[j][s] = EMPTY
            self.py[j].pop(self.kid_of[s], None)
        elif type(v) is float:
            self.vk[j][s] = FLOAT
            self.vf[j][s] = v
        elif I64_MIN <= v <= I64_MAX:
            self.vk[j][s] = INT
            self.vi[j][s] = v
            self.py[j].pop(self.kid_of[s], None)
        else:
            self.vk[j][s] = PY
            self.py[j][self.kid_of[s]] = v

    def load(self, Py_ssize_t kid, list slots, bint dirty=False):
        """See ``fold.WindowAcc.load``."""
        if kid < 0:
            raise ValueError(f"key id {kid} is negative")
        self._reach(<int32_t>kid)
        cdef int32_t s = self._slot(<int32_t>kid)
        cdef int j, pos = 0
        for j in range(self.naggs):
            if self.kind[j] == K_COUNT:
                self.cnt[j][s] = slots[pos]
                pos += 1
            elif self.kind[j] == K_MEAN:
                self._set(j, s, slots[pos])
                self.cnt[j][s] = slots[pos + 1]
                pos += 2
            else:
                self._set(j, s, slots[pos])
                pos += 1
        if dirty:
            self._touch(s)

    def python_start(self, int j, Py_ssize_t kid):
        """The int64 a slot held when it overflowed (``fold_window`` goes on from it)."""
        return self.vi[j][self.slot_of[kid]]

    def take_dirty(self):
        """See ``fold.WindowAcc.take_dirty``."""
        out = np.empty(self.ndirty, np.int32)
        cdef int32_t[::1] o = out
        cdef Py_ssize_t i
        for i in range(self.ndirty):
            o[i] = self.kid_of[self.dirty_slots[i]]
            self.dirty_flag[self.dirty_slots[i]] = 0
        self.ndirty = 0
        return out

    cdef list _columns(self, const int32_t *where, Py_ssize_t rows):
        """Every slot column of the slots ``where[:rows]`` (``where`` NULL: the slots
        ``0..rows-1``), copied (nothing returned points into this window's memory): an
        ``int64`` array where every row's value is an int64 int, a ``float64`` array where
        every one is a float, else a list of the values (``None`` for NULL, a Python int past
        int64). One pass to learn the kinds and one to copy, with no temporary per slot: at 1M
        keys each numpy gather and comparison was an 8 MB array faulted in afresh."""
        cdef Py_ssize_t i
        cdef int j, seen
        cdef int32_t s
        cdef uint8_t *vk
        cdef int64_t *src_i
        cdef double *src_f
        cdef int64_t[::1] oi
        cdef double[::1] of
        columns = []
        for j in range(self.naggs):
            if self.kind[j] != K_COUNT:
                vk = self.vk[j]
                seen = 0
                for i in range(rows):
                    seen |= 1 << vk[where[i] if where != NULL else i]
                if seen == 0 or seen == 1 << INT:
                    out = np.empty(rows, np.int64)
                    oi = out
                    src_i = self.vi[j]
                    for i in range(rows):
                        oi[i] = src_i[where[i] if where != NULL else i]
                elif seen == 1 << FLOAT:
                    out = np.empty(rows, np.float64)
                    of = out
                    src_f = self.vf[j]
                    for i in range(rows):
                        of[i] = src_f[where[i] if where != NULL else i]
                else:
                    out = [None] * rows
                    for i in range(rows):
                        s = where[i] if where != NULL else <int32_t>i
                        out[i] = self._value(j, s)
                columns.append(out)
            if self.kind[j] == K_COUNT or self.kind[j] == K_MEAN:
                out = np.empty(rows, np.int64)
                oi = out
                src_i = self.cnt[j]
                for i in range(rows):
                    oi[i] = src_i[where[i] if where != NULL else i]
                columns.append(out)
        return columns

    def export(self):
        """See ``fold.WindowAcc.export``."""
        cdef Py_ssize_t cap = self.cap
        ids = np.asarray(<int32_t[:cap]> self.kid_of)[: self.n].copy()
        return ids, self._columns(NULL, self.n)

    def export_rows(self, const int32_t[::1] kids):
        """See ``fold.WindowAcc.export_rows``."""
        cdef Py_ssize_t n = kids.shape[0], i
        where_a = np.empty(n, np.int32)
        cdef int32_t[::1] where = where_a
        cdef int32_t s
        for i in range(n):
            s = self._find(kids[i])
            if s < 0:
                raise KeyError(f"key id {kids[i]} has no accumulator in this window")
            where[i] = s
        return self._columns(&where[0] if n else NULL, n)

    def present_ids(self):
        """See ``fold.WindowAcc.present_ids``."""
        cdef Py_ssize_t cap = self.cap
        return np.sort(np.asarray(<int32_t[:cap]> self.kid_of)[: self.n])
