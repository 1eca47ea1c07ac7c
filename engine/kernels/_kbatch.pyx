# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``kbatch.py``: Kafka record batches (magic 2) into one block of values."""

import numpy as np
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize

DEF DONE = 0
DEF STOPPED = 1
DEF COMPRESSED = 2
DEF OLD_MAGIC = 3
DEF HEADER = 61
DEF CONTROL = 0x20


def _crc(data):
    # crc32c comes with the kafka extra: imported where a batch is checked, so the kernels
    # (every one of them) load in an installation without it
    import crc32c

    return crc32c.crc32c(data)


cdef struct Out:
    char *block
    Py_ssize_t size, cap
    int64_t *ends
    int64_t *offsets
    Py_ssize_t n, ncap


cdef int _grow(Out *o, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    cdef void *p
    if o.size + more > o.cap:
        cap = max(o.cap * 2, o.size + more, 4096)
        p = realloc(o.block, cap)
        if p == NULL:
            raise MemoryError()
        o.block, o.cap = <char *>p, cap
    if o.n + 1 > o.ncap:
        cap = max(o.ncap * 2, 1024)
        p = realloc(o.ends, cap * sizeof(int64_t))
        if p == NULL:
            raise MemoryError()
        o.ends = <int64_t *>p
        p = realloc(o.offsets, cap * sizeof(int64_t))
        if p == NULL:
            raise MemoryError()
        o.offsets, o.ncap = <int64_t *>p, cap
    return 0


cdef inline int64_t _be64(const uint8_t *p) nogil:
    cdef int64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return v


cdef inline int _be32(const uint8_t *p) nogil:
    return <int>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline Py_ssize_t _varint(const uint8_t *d, Py_ssize_t i, Py_ssize_t end,
                               int64_t *value) except -2:
    cdef uint64_t r = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if i >= end or shift > 63:
            raise ValueError("a record's varint runs past its batch")
        b = d[i]
        i += 1
        r |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            value[0] = <int64_t>(r >> 1) ^ -(<int64_t>(r & 1))
            return i
        shift += 7



cdef int _records(Out *o, list nulls, const uint8_t *d, Py_ssize_t pos, Py_ssize_t end,
                  int count, int64_t base, int64_t first, int64_t stop) except -1:
    """1 when ``stop`` was reached, else 0 (see ``kbatch._records``)."""
    cdef int64_t length, skip, delta, klen, vlen, offset
    cdef Py_ssize_t after
    cdef int k
    for k in range(count):
        pos = _varint(d, pos, end, &length)
        after = pos + length
        if length < 0 or after > end:
            raise ValueError("a record runs past its batch")
        pos += 1
        pos = _varint(d, pos, after, &skip)
        pos = _varint(d, pos, after, &delta)
        pos = _varint(d, pos, after, &klen)
        if klen > 0:
            pos += klen
        pos = _varint(d, pos, after, &vlen)
        offset = base + delta
        if offset >= stop:
            return 1
        if offset >= first:
            if vlen < 0:
                nulls.append(o.n)
                vlen = 0
            elif pos + vlen > after:
                raise ValueError("a record's value runs past the record")
            _grow(o, vlen + 1)
            memcpy(o.block + o.size, d + pos, vlen)
            o.size += vlen + 1
            o.block[o.size - 1] = 10
            o.ends[o.n] = o.size
            o.offsets[o.n] = offset
            o.n += 1
        pos = after
    return 0


cdef tuple _result(Out *o, list nulls, Py_ssize_t pos, int64_t nxt, int status):
    block = PyBytes_FromStringAndSize(o.block, o.size)
    ends = np.empty(o.n, np.int64)
    offsets = np.empty(o.n, np.int64)
    cdef int64_t[::1] e = ends
    cdef int64_t[::1] f = offsets
    if o.n:
        memcpy(&e[0], o.ends, o.n * sizeof(int64_t))
        memcpy(&f[0], o.offsets, o.n * sizeof(int64_t))
    return block, ends, offsets, nulls, pos, nxt, status


cdef void _init(Out *o) noexcept:
    o.block, o.ends, o.offsets = NULL, NULL, NULL
    o.size = o.cap = o.n = o.ncap = 0


cdef void _free(Out *o):
    free(o.block)
    free(o.ends)
    free(o.offsets)


def batch_values(const uint8_t[::1] buf, Py_ssize_t start, int64_t first, int64_t stop,
                 bint check_crc):
    """See ``kbatch.batch_values``."""
    cdef Out o
    _init(&o)
    cdef list nulls = []
    cdef Py_ssize_t n = buf.shape[0], pos = start, end
    cdef int64_t nxt = first, base, last
    cdef const uint8_t *d = &buf[0] if n else NULL
    cdef int attrs, count, blen
    cdef uint32_t crc
    try:
        while pos + HEADER <= n:
            base = _be64(d + pos)
            blen = _be32(d + pos + 8)
            end = pos + 12 + blen
            if end > n or blen < 0:
                break
            if d[pos + 16] != 2:
                return _result(&o, nulls, pos, nxt, OLD_MAGIC)
            crc = <uint32_t>_be32(d + pos + 17)
            if check_crc and _crc(buf[pos + 21:end]) != crc:
                raise ValueError(f"record batch at offset {base}: CRC-32C mismatch")
            attrs = (d[pos + 21] << 8) | d[pos + 22]
            last = _be32(d + pos + 23)
            count = _be32(d + pos + 57)
            if base + last < first:
                pos = end
                continue
            if base >= stop:
                return _result(&o, nulls, pos, stop, STOPPED)
            if attrs & 7 and not attrs & CONTROL:
                return _result(&o, nulls, pos, nxt, COMPRESSED)
            if not attrs & CONTROL and _records(&o, nulls, d, pos + HEADER, end, count, base,
                                                first, stop):
                return _result(&o, nulls, pos, stop, STOPPED)
            nxt = max(nxt, base + last + 1)
            pos = end
        return _result(&o, nulls, pos, nxt, DONE)
    finally:
        _free(&o)


def record_values(const uint8_t[::1] records, int count, int64_t base, int64_t first,
                  int64_t stop):
    """See ``kbatch.record_values``."""
    cdef Out o
    _init(&o)
    cdef list nulls = []
    cdef Py_ssize_t n = records.shape[0]
    cdef const uint8_t *d = &records[0] if n else NULL
    try:
        if _records(&o, nulls, d, 0, n, count, base, first, stop):
            return _result(&o, nulls, n, stop, STOPPED)
        return _result(&o, nulls, n, o.offsets[o.n - 1] + 1 if o.n else first, DONE)
    finally:
        _free(&o)
