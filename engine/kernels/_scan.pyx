# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twins of ``scan.scan_lines`` (the JSONL field scanner; the parser is
``_scan_impl.h``) and ``scan.count_byte``."""

import numpy as np
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

cdef extern from "_scan_impl.h":
    ctypedef struct w_name:
        pass
    ctypedef struct w_out:
        int nf
        const unsigned char **names
        const int *name_len
        w_name *words
        int64_t n
        unsigned char *tags
        int64_t *iv
        double *fv
        int64_t *ss
        int32_t *sl
    int64_t w_count_byte(const unsigned char *p, int64_t n, unsigned char b) nogil
    int w_prepare(w_out *o)
    int w_scan_line(const unsigned char *base, int64_t start, int64_t size, int64_t row,
                    w_out *o, int64_t *line_end) nogil


def count_byte(const unsigned char[::1] data, unsigned char byte):
    """See ``scan.count_byte``."""
    cdef int64_t n = data.shape[0], count = 0
    if n:
        with nogil:
            count = w_count_byte(&data[0], n, byte)
    return count


def scan_lines(const unsigned char[::1] block, tuple fields):
    """See ``scan.scan_lines``."""
    cdef int64_t size = block.shape[0], n = 0, row, at
    cdef const unsigned char *base = &block[0] if size else NULL
    cdef int nf = len(fields), j
    if size:
        with nogil:  # every line ends in \n but the block's last may not
            n = w_count_byte(base, size, 10) + (base[size - 1] != 10)
    starts_a = np.empty(n, np.int64)
    ends_a = np.empty(n, np.int64)
    status_a = np.empty(n, np.uint8)
    tags_a = np.zeros((nf, n), np.uint8)
    iv_a = np.empty((nf, n), np.int64)
    fv_a = np.empty((nf, n), np.float64)
    ss_a = np.empty((nf, n), np.int64)
    sl_a = np.empty((nf, n), np.int32)
    cdef int64_t[::1] starts = starts_a
    cdef int64_t[::1] ends = ends_a
    cdef unsigned char[::1] status = status_a
    cdef w_out o
    names = [bytes(f) for f in fields]
    o.nf = nf
    o.n = n
    o.names = <const unsigned char **>malloc((nf + 1) * sizeof(char *))
    o.name_len = <const int *>malloc((nf + 1) * sizeof(int))
    if o.names == NULL or o.name_len == NULL:
        free(o.names)
        free(<void *>o.name_len)
        raise MemoryError()
    for j in range(nf):
        o.names[j] = <const unsigned char *><char *>names[j]
        (<int *>o.name_len)[j] = len(names[j])
    if w_prepare(&o) < 0:
        free(o.names)
        free(<void *>o.name_len)
        raise MemoryError()
    cdef unsigned char[:, ::1] tags = tags_a
    cdef int64_t[:, ::1] iv = iv_a
    cdef double[:, ::1] fv = fv_a
    cdef int64_t[:, ::1] ss = ss_a
    cdef int32_t[:, ::1] sl = sl_a
    if n and nf:
        o.tags = &tags[0, 0]
        o.iv = &iv[0, 0]
        o.fv = &fv[0, 0]
        o.ss = &ss[0, 0]
        o.sl = &sl[0, 0]
    try:
        with nogil:  # one pass: each line's parse finds where it ends (_scan_impl.h)
            at = 0
            for row in range(n):
                starts[row] = at
                status[row] = w_scan_line(base, at, size, row, &o, &at)
                ends[row] = at
    finally:
        free(o.names)
        free(<void *>o.name_len)
        free(o.words)
    return status_a, starts_a, ends_a, tags_a, iv_a, fv_a, ss_a, sl_a, b"", {}
