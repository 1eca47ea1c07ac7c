# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``kbatch.py``: Kafka record batches (magic 2) into one block of values."""

import numpy as np
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy
from cpython.bytes cimport PyBytes_AS_STRING
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF

cdef extern from "Python.h":
    PyObject *_new_bytes "PyBytes_FromStringAndSize" (const char *, Py_ssize_t) except NULL
    int _PyBytes_Resize(PyObject **, Py_ssize_t) except -1

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
    # the block is the caller's buffer (``out``) when it is large enough, else a bytes object
    # of the input's size, written in place and cut to its size at the end: a record's value
    # and its \n never take more bytes than the record did (its length varint, attributes,
    # deltas, key length and header count take >= 6), so it never grows: no realloc copies,
    # no copy into a bytes object, no page touched twice
    PyObject *obj
    char *block
    Py_ssize_t size, cap
    int64_t *ends
    int64_t *offsets
    Py_ssize_t n, ncap


cdef int _start(Out *o, Py_ssize_t cap, object out) except -1:
    cdef uint8_t[::1] view
    o.obj, o.block, o.ends, o.offsets = NULL, NULL, NULL, NULL
    o.size = o.n = o.ncap = 0
    o.cap = cap
    if out is not None and len(out) >= cap and cap > 0:
        view = out
        o.block = <char *>&view[0]
        o.cap = len(out)
        return 0
    # one byte more: never the empty bytes singleton, which cannot be resized
    o.obj = _new_bytes(NULL, cap + 1)
    o.block = PyBytes_AS_STRING(<object>o.obj)
    return 0


cdef int _grow(Out *o, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    cdef void *p
    if o.size + more > o.cap:
        raise ValueError("a record's value runs past its batch")
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



cdef int _records(Out *o, list nulls, list odd, const uint8_t *d, Py_ssize_t pos,
                  Py_ssize_t end, int count, int64_t base, int64_t first,
                  int64_t stop) except -1:
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
            elif vlen == 0 or memchr(d + pos, 10, vlen) != NULL:
                odd.append(o.n)
            _grow(o, vlen + 1)
            memcpy(o.block + o.size, d + pos, vlen)
            o.size += vlen + 1
            o.block[o.size - 1] = 10
            o.ends[o.n] = o.size
            o.offsets[o.n] = offset
            o.n += 1
        pos = after
    return 0


cdef tuple _result(Out *o, list nulls, list odd, Py_ssize_t pos, int64_t nxt, int status,
                   object out):
    if o.obj == NULL:  # written into ``out``
        block = memoryview(out)[:o.size]
    else:
        _PyBytes_Resize(&o.obj, o.size)
        block = <object>o.obj
    ends = np.empty(o.n, np.int64)
    offsets = np.empty(o.n, np.int64)
    cdef int64_t[::1] e = ends
    cdef int64_t[::1] f = offsets
    if o.n:
        memcpy(&e[0], o.ends, o.n * sizeof(int64_t))
        memcpy(&f[0], o.offsets, o.n * sizeof(int64_t))
    return block, ends, offsets, nulls, pos, nxt, status, odd


cdef void _free(Out *o):
    Py_XDECREF(o.obj)  # the block's, once _result holds its own
    free(o.ends)
    free(o.offsets)


def batch_values(const uint8_t[::1] buf, Py_ssize_t start, int64_t first, int64_t stop,
                 bint check_crc, out=None):
    """See ``kbatch.batch_values``."""
    cdef Out o
    cdef list nulls = [], odd = []
    cdef Py_ssize_t n = buf.shape[0], pos = start, end
    cdef int64_t nxt = first, base, last
    cdef const uint8_t *d = &buf[0] if n else NULL
    cdef int attrs, count, blen
    cdef uint32_t crc
    _start(&o, max(n - start, 0), out)
    try:
        while pos + HEADER <= n:
            base = _be64(d + pos)
            blen = _be32(d + pos + 8)
            end = pos + 12 + blen
            if end > n or blen < 0:
                break
            if d[pos + 16] != 2:
                return _result(&o, nulls, odd, pos, nxt, OLD_MAGIC, out)
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
                return _result(&o, nulls, odd, pos, stop, STOPPED, out)
            if attrs & 7 and not attrs & CONTROL:
                return _result(&o, nulls, odd, pos, nxt, COMPRESSED, out)
            if not attrs & CONTROL and _records(&o, nulls, odd, d, pos + HEADER, end, count, base,
                                                first, stop):
                return _result(&o, nulls, odd, pos, stop, STOPPED, out)
            nxt = max(nxt, base + last + 1)
            pos = end
        return _result(&o, nulls, odd, pos, nxt, DONE, out)
    finally:
        _free(&o)


def record_values(const uint8_t[::1] records, int count, int64_t base, int64_t first,
                  int64_t stop):
    """See ``kbatch.record_values``."""
    cdef Out o
    cdef list nulls = [], odd = []
    cdef Py_ssize_t n = records.shape[0]
    cdef const uint8_t *d = &records[0] if n else NULL
    _start(&o, n, None)
    try:
        if _records(&o, nulls, odd, d, 0, n, count, base, first, stop):
            return _result(&o, nulls, odd, n, stop, STOPPED, None)
        return _result(&o, nulls, odd, n, o.offsets[o.n - 1] + 1 if o.n else first, DONE, None)
    finally:
        _free(&o)
