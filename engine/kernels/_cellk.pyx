# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``cellk.py``: a key's rows in the cells of its bucket (``state/cells.py``).

Each cell is searched in place as ``cells._lookup`` does (the records' CRC column bisected, the
key's bytes compared, its int64 and float64 slots read), in C. A cell whose sizes do not add up,
or a row with a msgpack slot, goes to the Python path, which reads it as it always has (and
raises ``StateError`` for a damaged cell), so both implementations answer alike.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcmp, memcpy

from weir.state.cells import lookup_row

DEF HEADER = 12
DEF CELL_FORMAT = 1
DEF INT = 0
DEF FLOAT = 1
DEF NS_AT = 6
DEF NS_END = 14


cdef inline uint32_t _u32(const uint8_t *p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)  # the cell is little-endian, as every platform weir builds for
    return v


cdef object _lookup(bytes raw, bytes key, uint32_t h):
    cdef const uint8_t *p = raw
    cdef Py_ssize_t size = len(raw), klen = len(key)
    cdef const uint8_t *kp = key
    if size < HEADER or p[0] != CELL_FORMAT:
        return lookup_row(raw, key, h)
    cdef Py_ssize_t s = p[1], n = _u32(p + 4), key_bytes = _u32(p + 8)
    cdef Py_ssize_t rec = HEADER + s + ((-s) & 7), w = 8 + 8 * s
    cdef Py_ssize_t keys_at = rec + n * w
    if keys_at + key_bytes > size:
        return lookup_row(raw, key, h)
    cdef Py_ssize_t lo = 0, hi = n, mid, i, j, a, b
    while lo < hi:
        mid = (lo + hi) >> 1
        if _u32(p + rec + mid * w) < h:
            lo = mid + 1
        else:
            hi = mid
    cdef int64_t iv
    cdef double dv
    i = lo
    while i < n and _u32(p + rec + i * w) == h:
        a = _u32(p + rec + i * w + 4)
        b = _u32(p + rec + (i + 1) * w + 4) if i + 1 < n else key_bytes
        if b - a == klen and b <= key_bytes and memcmp(p + keys_at + a, kp, klen) == 0:
            out = []
            for j in range(s):
                if p[HEADER + j] == INT:
                    memcpy(&iv, p + rec + i * w + 8 + 8 * j, 8)
                    out.append(iv)
                elif p[HEADER + j] == FLOAT:
                    memcpy(&dv, p + rec + i * w + 8 + 8 * j, 8)
                    out.append(dv)
                else:
                    return lookup_row(raw, key, h)
            return out
        i += 1
    return None


def find_windows(entries, bytes key, uint32_t h):
    """``key``'s slots by namespace (window end, encoded) from its bucket's ``entries``
    (``(cell key, cell)`` in key order: each window's generations oldest first); the newest
    generation holding the key wins."""
    found = {}
    cdef Py_ssize_t k
    for k in range(len(entries) - 1, -1, -1):
        ckey, raw = entries[k]
        ns = ckey[NS_AT:NS_END]
        if ns not in found:
            slots = _lookup(raw, key, h)
            if slots is not None:
                found[ns] = slots
    return found
