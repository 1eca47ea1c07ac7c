# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``cellk.py``: a key's rows in the cells of its bucket (``state/cells.py``),
rows written as cells (``encode_packed``), and a cell's generations merged into one
(``merge_cells``).

Each cell is searched in place as ``cells._lookup`` does (the records' CRC column bisected, the
key's bytes compared, its int64 and float64 slots read), in C. A cell whose sizes do not add up,
or a row with a msgpack slot, goes to the Python path, which reads it as it always has (and
raises ``StateError`` for a damaged cell), so both implementations answer alike.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

from weir.state import cellcodec
from weir.state.cellcodec import cell_key, encode_packed as encode_packed_twin
from weir.state.cells import lookup_row, merge as merge_twin

DEF HEADER = 12
DEF CELL_FORMAT = 1
DEF INT = 0
DEF FLOAT = 1
DEF NS_AT = 6
DEF NS_END = 14
DEF SHORT = 16  # a key this long or shorter is copied into its cell with one fixed-size move


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


# -- encoding ------------------------------------------------------------------------------------


cdef void _radix(uint64_t *key, int64_t *idx, uint64_t *key2, int64_t *idx2,
                 Py_ssize_t n) noexcept nogil:
    """Sort ``idx`` by ``key`` (both in place), stably: LSD radix, a byte at a time, a pass
    skipped where every key has the same byte (a cell id's high bytes)."""
    cdef Py_ssize_t count[256]
    cdef Py_ssize_t i, total, c
    cdef int shift
    cdef uint64_t *ka = key
    cdef int64_t *ia = idx
    cdef uint64_t *kb = key2
    cdef int64_t *ib = idx2
    cdef uint64_t *kt
    cdef int64_t *it
    for shift in range(0, 64, 8):
        memset(count, 0, sizeof(count))
        for i in range(n):
            count[(ka[i] >> shift) & 255] += 1
        if count[(ka[0] >> shift) & 255] == n:
            continue
        total = 0
        for i in range(256):
            c = count[i]
            count[i] = total
            total += c
        for i in range(n):
            c = (ka[i] >> shift) & 255
            kb[count[c]] = ka[i]
            ib[count[c]] = ia[i]
            count[c] += 1
        kt = ka
        ka = kb
        kb = kt
        it = ia
        ia = ib
        ib = it
    if ka != key:
        memcpy(key, ka, n * sizeof(uint64_t))
        memcpy(idx, ia, n * sizeof(int64_t))


cdef inline int _key_cmp(const uint8_t *blob, const int64_t *offs, int64_t a, int64_t b) noexcept nogil:
    """Compare keys ``a`` and ``b`` as Python compares bytes."""
    cdef int64_t la = offs[a + 1] - offs[a], lb = offs[b + 1] - offs[b]
    cdef int r = memcmp(blob + offs[a], blob + offs[b], la if la < lb else lb)
    if r:
        return r
    return (la > lb) - (la < lb)


cdef void _tie_break(uint64_t *key, int64_t *idx, Py_ssize_t n, const uint8_t *blob,
                     const int64_t *offs) noexcept nogil:
    """Rows of one cell with the same CRC (the same sort key) in key-byte order: an insertion
    sort of each such run (rare: a few per million rows), stable as ``sorted``."""
    cdef Py_ssize_t a = 0, b, i, j
    cdef int64_t v
    while a < n:
        b = a + 1
        while b < n and key[b] == key[a]:
            b += 1
        for i in range(a + 1, b):
            v = idx[i]
            j = i
            while j > a and _key_cmp(blob, offs, idx[j - 1], v) > 0:
                idx[j] = idx[j - 1]
                j -= 1
            idx[j] = v
        a = b


cdef void _fill(uint8_t *out, Py_ssize_t a, Py_ssize_t b, const int64_t *idx,
                const uint32_t *crc, const int64_t *offs, const uint8_t *blob,
                const int64_t *slots, Py_ssize_t n, int s, const uint8_t *kinds,
                int64_t kbytes) noexcept nogil:
    """Cell value of sorted rows ``a:b`` (``state/cells.py`` describes the layout), whose keys
    are ``kbytes`` long in all. A key of at most ``SHORT`` bytes is copied as one fixed-size
    move where both its source and the cell have that many bytes left (the next key overwrites
    what it wrote past this one), not a call to ``memcpy``: most keys are this short."""
    cdef Py_ssize_t rec = 12 + s + ((-s) & 7), w = 8 + 8 * s, i, j
    cdef uint32_t kb = 0, v
    cdef int64_t r, length, blob_len = offs[n]
    cdef uint8_t *p
    cdef uint8_t *keys = out + rec + (b - a) * w
    for i in range(a, b):
        r = idx[i]
        length = offs[r + 1] - offs[r]
        p = out + rec + (i - a) * w
        memcpy(p, &crc[r], 4)
        memcpy(p + 4, &kb, 4)
        for j in range(s):
            memcpy(p + 8 + 8 * j, &slots[j * n + r], 8)
        if length <= SHORT and kb + SHORT <= kbytes and offs[r] + SHORT <= blob_len:
            memcpy(keys + kb, blob + offs[r], SHORT)
        else:
            memcpy(keys + kb, blob + offs[r], length)
        kb += <uint32_t>length
    out[0] = 1  # CELL_FORMAT
    out[1] = <uint8_t>s
    out[2] = 0
    out[3] = 0
    v = <uint32_t>(b - a)
    memcpy(out + 4, &v, 4)
    memcpy(out + 8, &kb, 4)
    memset(out + 12, 0, rec - 12)
    memcpy(out + 12, kinds, s)


def encode_packed(rows, state_id, end, gen, coarse=False):
    """See ``cellcodec.encode_packed``: the same cells byte for byte, sorted and assembled in
    C with the GIL released. Rows with a msgpack (OBJECT) slot, or a column of another dtype,
    go to the twin, which writes (or refuses) them as it always has."""
    cols = rows.slots
    cdef int s = len(cols), j
    cdef Py_ssize_t n = len(rows.crc), i, cells = 0
    if n == 0:
        return []
    for col in cols:
        if (not isinstance(col, np.ndarray) or col.dtype not in (np.int64, np.float64)
                or col.shape != (n,)):
            return encode_packed_twin(rows, state_id, end, gen, coarse)
    # the layout's constants (a power of two; a benchmark varies them)
    cdef int bbits = cellcodec.BUCKETS.bit_length() - 1
    cdef int shift = cellcodec.COARSE_SHIFT if coarse else 0
    if s > 255 or cellcodec.BUCKETS != 1 << bbits or bbits > 15 or shift > bbits:
        return encode_packed_twin(rows, state_id, end, gen, coarse)
    cdef uint64_t bmask = cellcodec.BUCKETS - 1
    cdef int cbits = bbits - shift  # bits of a cell's bucket within its key group
    cdef uint64_t flag = cellcodec.COARSE if coarse else 0
    proto = cell_key(0, state_id, 0, end, gen)  # validates the state id and the end
    kinds = bytes([0 if col.dtype == np.int64 else 1 for col in cols])
    slots_a = np.empty((max(s, 1), n), np.int64)
    for j in range(s):
        slots_a[j] = cols[j].view(np.int64)
    cdef const int64_t[:, ::1] slots = slots_a
    cdef const uint32_t[::1] crc = np.ascontiguousarray(rows.crc, np.uint32)
    cdef const int64_t[::1] kg = np.ascontiguousarray(rows.key_groups, np.int64)
    cdef const int64_t[::1] offs = np.ascontiguousarray(rows.offsets, np.int64)
    cdef const uint8_t[::1] blob = rows.blob if len(rows.blob) else b"\0"
    if offs.shape[0] != n + 1 or kg.shape[0] != n or slots_a.shape[1] != n:
        raise ValueError(f"packed rows of {n} keys need {n + 1} offsets and {n} key groups")
    key_a, idx_a = np.empty(n, np.uint64), np.arange(n, dtype=np.int64)
    tmp_k, tmp_i = np.empty(n, np.uint64), np.empty(n + 1, np.int64)
    cdef uint64_t[::1] key = key_a
    cdef int64_t[::1] idx = idx_a
    cdef uint64_t[::1] k2 = tmp_k
    cdef int64_t[::1] bounds = tmp_i  # the radix sort's scratch, then each cell's first row
    cdef const uint8_t *kp = kinds
    with nogil:
        for i in range(n):
            key[i] = ((<uint64_t>kg[i] << cbits) | (((crc[i] >> 16) & bmask) >> shift)) << 32
            key[i] |= crc[i]
        _radix(&key[0], &idx[0], &k2[0], &bounds[0], n)
        _tie_break(&key[0], &idx[0], n, &blob[0], &offs[0])
        for i in range(n):
            if i == 0 or (key[i] >> 32) != (key[i - 1] >> 32):
                bounds[cells] = i
                cells += 1
        bounds[cells] = n
    return _cells(cells, bounds, key, idx, crc, offs, blob, slots, s, kp, proto, cbits, flag)


cdef list _cells(Py_ssize_t cells, const int64_t[::1] bounds, const uint64_t[::1] key,
                 const int64_t[::1] idx, const uint32_t[::1] crc, const int64_t[::1] offs,
                 const uint8_t[::1] blob, const int64_t[:, ::1] slots, int s,
                 const uint8_t *kinds, bytes proto, int cbits, uint64_t flag):
    """The ``(cell key, value)`` of each of the sorted rows' ``cells``: the values allocated
    with the GIL, filled without it."""
    cdef Py_ssize_t head = 12 + s + ((-s) & 7), w = 8 + 8 * s, c, i, n = idx.shape[0]
    cdef int64_t kbytes
    cdef uint8_t *p
    cdef uint64_t cid, bucket
    cdef uint8_t **dst = <uint8_t **>malloc(max(cells, 1) * sizeof(uint8_t *))
    cdef int64_t *klen = <int64_t *>malloc(max(cells, 1) * sizeof(int64_t))
    if dst == NULL or klen == NULL:
        free(dst)
        free(klen)
        raise MemoryError()
    out = []
    try:
        for c in range(cells):
            kbytes = 0
            for i in range(bounds[c], bounds[c + 1]):
                kbytes += offs[idx[i] + 1] - offs[idx[i]]
            klen[c] = kbytes
            value = PyBytes_FromStringAndSize(NULL, head + (bounds[c + 1] - bounds[c]) * w + kbytes)
            dst[c] = <uint8_t *>PyBytes_AS_STRING(value)
            ckey = PyBytes_FromStringAndSize(proto, len(proto))
            p = <uint8_t *>PyBytes_AS_STRING(ckey)
            cid = key[bounds[c]] >> 32
            p[0] = <uint8_t>((cid >> (cbits + 8)) & 255)  # the key group, 2 bytes big-endian
            p[1] = <uint8_t>((cid >> cbits) & 255)
            bucket = (cid & ((1 << cbits) - 1)) | flag
            p[4] = <uint8_t>(bucket >> 8)  # the bucket, 2 bytes big-endian
            p[5] = <uint8_t>(bucket & 255)
            out.append((ckey, value))
        with nogil:
            for c in range(cells):
                _fill(dst[c], bounds[c], bounds[c + 1], &idx[0], &crc[0], &offs[0], &blob[0],
                      &slots[0, 0], n, s, kinds, klen[c])
    finally:
        free(dst)
        free(klen)
    return out


# -- merging -------------------------------------------------------------------------------------


cdef struct Part:
    const uint8_t *rec  # the first record
    const uint8_t *keys  # the key blob
    Py_ssize_t n, key_bytes, at  # rows, key bytes, the next row to merge


cdef inline Py_ssize_t _key_len(const Part *q, Py_ssize_t i, Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t a = _u32(q.rec + i * w + 4)
    return (_u32(q.rec + (i + 1) * w + 4) if i + 1 < q.n else q.key_bytes) - a


cdef inline int _row_cmp(const Part *x, const Part *y, Py_ssize_t w) noexcept nogil:
    """(CRC, key bytes) of ``x``'s next row against ``y``'s, as ``bytes`` compare."""
    cdef uint32_t hx = _u32(x.rec + x.at * w), hy = _u32(y.rec + y.at * w)
    if hx != hy:
        return -1 if hx < hy else 1
    cdef Py_ssize_t lx = _key_len(x, x.at, w), ly = _key_len(y, y.at, w)
    cdef int c = memcmp(x.keys + _u32(x.rec + x.at * w + 4), y.keys + _u32(y.rec + y.at * w + 4),
                        lx if lx < ly else ly)
    if c:
        return c
    return -1 if lx < ly else (1 if lx > ly else 0)


cdef Py_ssize_t _merge_order(Part *parts, int m, Py_ssize_t w, int32_t *src, int32_t *row,
                             Py_ssize_t *key_bytes) noexcept nogil:
    """The merged rows in (CRC, key) order, each key once from the newest part holding it:
    ``src[k]``, ``row[k]`` name row k's part and its row there. Returns how many rows."""
    cdef Py_ssize_t k = 0, total = 0
    cdef int j, best, c
    while True:
        best = -1
        for j in range(m - 1, -1, -1):  # newest first: an equal key keeps the newest
            if parts[j].at < parts[j].n and (best < 0 or _row_cmp(&parts[j], &parts[best], w) < 0):
                best = j
        if best < 0:
            break
        src[k] = best
        row[k] = <int32_t>parts[best].at
        total += _key_len(&parts[best], parts[best].at, w)
        for j in range(m):  # every part's row of this key is older (or this one)
            if j != best and parts[j].at < parts[j].n and _row_cmp(&parts[j], &parts[best], w) == 0:
                parts[j].at += 1
        parts[best].at += 1
        k += 1
    key_bytes[0] = total
    return k


def merge_cells(list cells):
    """See ``cells.merge``: the same cell byte for byte, merged in C. Cells whose slots are not
    all int64 or float64 alike, with no rows, or whose sizes do not add up go to the twin,
    which merges (or refuses) them as it always has."""
    cdef int m = len(cells), j, s
    if m == 1:
        return cells[0]
    if m == 0 or m > 64:
        return merge_twin(cells)
    cdef Part parts[64]
    cdef const uint8_t *p
    cdef const uint8_t *kinds = NULL
    cdef Py_ssize_t size, total = 0, w = 0, rec = 0, i
    for j in range(m):
        raw = cells[j]
        if type(raw) is not bytes:
            return merge_twin(cells)
        p = <const uint8_t *>PyBytes_AS_STRING(raw)
        size = len(raw)
        if size < HEADER or p[0] != CELL_FORMAT:
            return merge_twin(cells)
        if j == 0:
            s, kinds = p[1], p + HEADER
            rec, w = HEADER + s + ((-s) & 7), 8 + 8 * p[1]
            for i in range(s):
                if kinds[i] != INT and kinds[i] != FLOAT:
                    return merge_twin(cells)
        elif p[1] != s or memcmp(p + HEADER, kinds, s) != 0:
            return merge_twin(cells)
        parts[j].n = _u32(p + 4)
        parts[j].key_bytes = _u32(p + 8)
        if size < rec or (size - rec) // w < parts[j].n or rec + parts[j].n * w + parts[j].key_bytes != size:
            return merge_twin(cells)
        parts[j].rec, parts[j].keys, parts[j].at = p + rec, p + rec + parts[j].n * w, 0
        total += parts[j].n
    if total == 0 or total > 0x7FFFFFFF:
        return merge_twin(cells)
    src_a, row_a = np.empty(total, np.int32), np.empty(total, np.int32)
    cdef int32_t[::1] src = src_a
    cdef int32_t[::1] row = row_a
    cdef Py_ssize_t n, key_bytes = 0, k, a, length, kat = 0
    with nogil:
        n = _merge_order(parts, m, w, &src[0], &row[0], &key_bytes)
    value = PyBytes_FromStringAndSize(NULL, rec + n * w + key_bytes)
    cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(value)
    cdef uint32_t n32 = <uint32_t>n, kb32 = <uint32_t>key_bytes, off
    cdef const Part *q
    cdef const uint8_t *head = <const uint8_t *>PyBytes_AS_STRING(cells[0])
    with nogil:
        memcpy(out, head, rec)  # header and kinds
        memcpy(out + 4, &n32, 4)
        memcpy(out + 8, &kb32, 4)
        for k in range(n):
            q = &parts[src[k]]
            a = _u32(q.rec + row[k] * w + 4)
            length = _key_len(q, row[k], w)
            memcpy(out + rec + k * w, q.rec + row[k] * w, w)
            off = <uint32_t>kat
            memcpy(out + rec + k * w + 4, &off, 4)
            memcpy(out + rec + n * w + kat, q.keys + a, length)
            kat += length
    return value
