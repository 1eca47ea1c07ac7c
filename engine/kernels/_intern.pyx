# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``intern.py``: keys (UTF-8 byte spans) to dense ids through an open-addressing
table, the key group of each new key computed once (zlib's CRC-32, the polynomial of
``state.keygroups``)."""

import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    object PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)

cdef uint32_t CRC_TABLE[256]


cdef void _crc_init() noexcept:
    cdef uint32_t c, n, k
    for n in range(256):
        c = n
        for k in range(8):
            c = (0xEDB88320U ^ (c >> 1)) if (c & 1) else (c >> 1)
        CRC_TABLE[n] = c


_crc_init()


cdef inline uint32_t crc32(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c = 0xFFFFFFFFU
    cdef Py_ssize_t i
    for i in range(n):
        c = CRC_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFFU


cdef extern from *:
    """
    #include <string.h>
    /* WEIR_HEAD[k]: a word whose first k bytes, in memory order, are all ones: a word loaded
     * from a key, masked with it, holds the key's first k bytes and zeros, as a copy of k
     * bytes into a zeroed word would (built from bytes, so it holds on either endianness) */
    static uint64_t WEIR_HEAD[9];
    static void weir_head_init(void) {
        for (int k = 0; k <= 8; k++) {
            unsigned char b[8] = {0};
            memset(b, 0xff, (size_t)k);
            memcpy(&WEIR_HEAD[k], b, 8);
        }
    }
    static inline uint64_t weir_load8(const uint8_t *p) {
        uint64_t w;
        memcpy(&w, p, 8);  /* one unaligned load */
        return w;
    }
    """
    uint64_t WEIR_HEAD[9]
    void weir_head_init() nogil
    uint64_t weir_load8(const uint8_t *p) nogil

weir_head_init()


cdef inline uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n,
                                const uint8_t *end=NULL) noexcept nogil:
    # a multiply-xorshift over 8-byte words: lookups hash every row, so it must be cheap.
    # ``end``: where the buffer holding the key ends, so that a short tail is read as one word
    # and masked (no memcpy call) where 8 bytes from it are there to read
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ <uint64_t>n, w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL
        h ^= h >> 31
        i += 8
    w = 0
    if i < n:
        if end != NULL and p + i + 8 <= end:
            w = weir_load8(p + i) & WEIR_HEAD[n - i]
        else:
            memcpy(&w, p + i, n - i)
    h = (h ^ w) * 0x94D049BB133111EBULL
    h ^= h >> 29
    h *= 0xBF58476D1CE4E5B9ULL
    return h ^ (h >> 32)


def crc32_of(const uint8_t[::1] data):
    """CRC-32 of ``data`` (equal to ``zlib.crc32``), for the tests."""
    return crc32(&data[0], data.shape[0]) if data.shape[0] else 0


def span_groups(const uint8_t[::1] data, const int64_t[::1] starts, const int32_t[::1] lens,
                int max_parallelism):
    """See ``intern.span_groups``."""
    cdef Py_ssize_t rows = starts.shape[0], i
    out = np.empty(rows, dtype=np.int32)
    cdef int32_t[::1] g = out
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef uint32_t m = max_parallelism
    with nogil:
        for i in range(rows):
            g[i] = <int32_t>(crc32(base + starts[i], lens[i]) % m)
    return out


def pack_strs(list keys):
    """See ``intern.pack_strs``."""
    cdef Py_ssize_t rows = len(keys), i, length, total = 0
    offsets_a = np.empty(rows + 1, dtype=np.int32)
    cdef int32_t[::1] offsets = offsets_a
    cdef const char *p
    offsets[0] = 0
    for i in range(rows):
        PyUnicode_AsUTF8AndSize(<str?>keys[i], &length)
        total += length
        if total > 0x7FFFFFFF:
            raise ValueError("the keys of one batch exceed 2 GiB")
        offsets[i + 1] = <int32_t>total
    out = bytearray(total)
    cdef unsigned char *dst = out
    for i in range(rows):
        p = PyUnicode_AsUTF8AndSize(keys[i], &length)
        memcpy(dst + offsets[i], p, length)
    return bytes(out), offsets_a


def gather_spans(const uint8_t[::1] data, const int64_t[::1] starts, const int32_t[::1] lens):
    """See ``intern.gather_spans``."""
    cdef Py_ssize_t rows = starts.shape[0], i, total = 0
    offsets_a = np.empty(rows + 1, dtype=np.int32)
    cdef int32_t[::1] offsets = offsets_a
    offsets[0] = 0
    for i in range(rows):
        total += lens[i]
        if total > 0x7FFFFFFF:
            raise ValueError("the keys of one batch exceed 2 GiB")
        offsets[i + 1] = <int32_t>total
    out = bytearray(total)
    cdef unsigned char *dst = out
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    with nogil:
        for i in range(rows):
            memcpy(dst + offsets[i], base + starts[i], lens[i])
    return bytes(out), offsets_a


def list_groups(list keys, int max_parallelism):
    """See ``intern.list_groups``."""
    cdef Py_ssize_t rows = len(keys), i, length
    out = np.empty(rows, dtype=np.int32)
    cdef int32_t[::1] g = out
    cdef const char *p
    cdef uint32_t m = max_parallelism
    for i in range(rows):
        p = PyUnicode_AsUTF8AndSize(<str?>keys[i], &length)
        g[i] = <int32_t>(crc32(<const uint8_t *>p, length) % m)
    return out


cdef struct KeyMeta:
    int64_t off
    int32_t length
    int32_t group
    uint32_t crc  # the key's CRC-32: a window's cleanup timers name its keys' cells by it


# A table slot: 32 bytes, two to a cache line (the table is 64-byte aligned). It holds the
# key's first INLINE bytes and its length, so a probe for a key of up to INLINE bytes (most
# ids) touches this one cache line and nothing else; a longer key's rest is in the arena.
cdef enum:
    INLINE = 22


cdef struct Slot:
    uint32_t tag  # the hash's high 32 bits (its low bits pick the slot)
    int32_t id  # -1: the slot is empty
    uint16_t length  # min(length, 0xFFFF): a longer key is told apart by its meta length
    uint8_t key[INLINE]  # the key's first min(length, INLINE) bytes, zero padded


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define WEIR_PREFETCH(p) __builtin_prefetch((p))
    #else
    #define WEIR_PREFETCH(p) ((void)0)
    #endif
    """
    void WEIR_PREFETCH(const void *p) noexcept nogil


# The table's memory. On Linux its own mapping, grown with ``mremap``: the pages of the table
# before stay (moved, not copied) and only the new half is faulted in, so growing to a table of
# T bytes faults T bytes in all instead of 2T (the old tables were freed and new ones faulted
# afresh). At 1M keys that is 16k page faults fewer, a few percent of a run. Elsewhere an
# aligned block, the new one allocated before the old is freed.
cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    static void *weir_table_alloc(size_t bytes) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    static void *weir_table_grow(void *p, size_t old_bytes, size_t bytes) {
        void *q = mremap(p, old_bytes, bytes, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : q;
    }
    static void weir_table_free(void *p, size_t bytes) {
        if (p != NULL) munmap(p, bytes);
    }
    #else
    static void *weir_table_alloc(size_t bytes) { return aligned_alloc(64, bytes); }
    static void *weir_table_grow(void *p, size_t old_bytes, size_t bytes) {
        void *q = aligned_alloc(64, bytes);
        if (q != NULL) free(p);
        return q;
    }
    static void weir_table_free(void *p, size_t bytes) { free(p); }
    #endif
    """
    void *weir_table_alloc(size_t bytes) nogil
    void *weir_table_grow(void *p, size_t old_bytes, size_t bytes) nogil
    void weir_table_free(void *p, size_t bytes) nogil


# hashing runs this many rows ahead of probing; the probe's slot is prefetched PREFETCH rows
# ahead, so its cache miss overlaps the probes before it (1M keys: the table is ~64 MiB)
cdef enum:
    CHUNK = 256
    PREFETCH = 12
    SHORT = 16  # a key this long or shorter is gathered with one fixed-size move


cdef inline void _fill(Slot *s, const uint8_t *p, Py_ssize_t length, uint64_t h,
                       int32_t kid, const uint8_t *end=NULL) noexcept nogil:
    # ``end``: where the buffer holding the key ends. A key of up to 16 bytes whose buffer
    # holds 16 from its start goes in as two masked words, not with a memcpy call: most ids
    # are that short, and a lookup fills a probe slot for every row
    cdef Py_ssize_t inline_len = length if length < INLINE else INLINE
    cdef uint64_t w
    memset(s, 0, sizeof(Slot))
    s.tag = <uint32_t>(h >> 32)
    s.id = kid
    s.length = <uint16_t>(length if length < 0xFFFF else 0xFFFF)
    if end != NULL and length <= 16 and p + 16 <= end:
        w = weir_load8(p) & WEIR_HEAD[length if length < 8 else 8]
        memcpy(&s.key[0], &w, 8)
        w = weir_load8(p + 8) & WEIR_HEAD[length - 8 if length > 8 else 0]
        memcpy(&s.key[8], &w, 8)
    elif inline_len:
        memcpy(s.key, p, inline_len)


cdef Slot *_new_table(uint64_t cap) except NULL nogil:
    cdef Slot *t = <Slot *>weir_table_alloc(cap * sizeof(Slot))
    if t == NULL:
        with gil:
            raise MemoryError()
    memset(t, 0xFF, cap * sizeof(Slot))  # id -1 everywhere: empty
    return t


cdef Slot *_grown_table(Slot *t, uint64_t cap, uint64_t new_cap) except NULL nogil:
    """``t`` (``cap`` slots) made ``new_cap`` slots, every one empty; ``t`` is gone."""
    cdef Slot *g = <Slot *>weir_table_grow(t, cap * sizeof(Slot), new_cap * sizeof(Slot))
    if g == NULL:
        with gil:
            raise MemoryError()
    memset(g, 0xFF, new_cap * sizeof(Slot))
    return g


cdef class Interner:
    """See ``intern.Interner``.

    The table is open-addressing with linear probing over 32-byte ``Slot``s that hold the
    hash's high bits, the id, the length and the first bytes of the key: a lookup of a short
    key reads one slot's cache line, and ``intern`` hashes a run of rows first and prefetches
    their slots a fixed distance ahead, so the misses of a table larger than the cache overlap.
    A key's offset, length and group sit together in ``meta``; its full hash in ``hashes``
    (for growing the table)."""

    cdef Slot *table
    cdef uint64_t mask
    cdef uint64_t *hashes
    cdef KeyMeta *meta
    cdef uint8_t *arena
    cdef int64_t arena_len, arena_cap
    cdef Py_ssize_t n, id_cap
    cdef readonly int max_parallelism
    cdef list _names

    def __cinit__(self, int max_parallelism):
        if max_parallelism < 1:
            raise ValueError(f"max_parallelism={max_parallelism} must be >= 1")
        self.max_parallelism = max_parallelism
        self.mask = 1023
        self.table = _new_table(1024)
        self.id_cap = 512
        self.hashes = <uint64_t *>malloc(self.id_cap * sizeof(uint64_t))
        self.meta = <KeyMeta *>malloc(self.id_cap * sizeof(KeyMeta))
        self.arena_cap = 1 << 14
        self.arena = <uint8_t *>malloc(self.arena_cap)
        self.arena_len = 0
        self.n = 0
        self._names = []
        if not (self.hashes and self.meta and self.arena):
            raise MemoryError()

    def __dealloc__(self):
        weir_table_free(self.table, (self.mask + 1) * sizeof(Slot))
        free(self.hashes)
        free(self.meta)
        free(self.arena)

    def __len__(self):
        return self.n

    cdef int _grow_table(self) except -1 nogil:
        cdef uint64_t cap = (self.mask + 1) * 2, j, h
        # every key is inserted again from ``hashes`` and ``meta``: the old slots are not read
        cdef Slot *t = _grown_table(self.table, self.mask + 1, cap)
        self.table = t
        cdef Py_ssize_t i
        cdef KeyMeta *m
        for i in range(self.n):
            h = self.hashes[i]
            if i + PREFETCH < self.n:  # rehashing writes slots at random: overlap the misses
                WEIR_PREFETCH(&t[self.hashes[i + PREFETCH] & (cap - 1)])
            j = h & (cap - 1)
            while t[j].id != -1:
                j = (j + 1) & (cap - 1)
            m = &self.meta[i]
            _fill(&t[j], self.arena + m.off, m.length, h, <int32_t>i)
        self.mask = cap - 1
        return 0

    cdef int _add(self, const uint8_t *p, Py_ssize_t length, uint64_t h, uint64_t slot) except -1 nogil:
        cdef Py_ssize_t cap
        cdef uint32_t crc
        if self.n == self.id_cap:
            cap = self.id_cap * 2
            self.hashes = <uint64_t *>realloc(self.hashes, cap * sizeof(uint64_t))
            self.meta = <KeyMeta *>realloc(self.meta, cap * sizeof(KeyMeta))
            if not (self.hashes and self.meta):
                with gil:
                    raise MemoryError()
            self.id_cap = cap
        while self.arena_len + length + SHORT > self.arena_cap:  # SHORT: gather_keys' room
            self.arena_cap *= 2
            self.arena = <uint8_t *>realloc(self.arena, self.arena_cap)
            if self.arena == NULL:
                with gil:
                    raise MemoryError()
        if length:
            memcpy(self.arena + self.arena_len, p, length)
        self.meta[self.n].off = self.arena_len
        self.meta[self.n].length = <int32_t>length
        crc = crc32(p, length)
        self.meta[self.n].crc = crc
        self.meta[self.n].group = <int32_t>(crc % <uint32_t>self.max_parallelism)
        self.arena_len += length
        self.hashes[self.n] = h
        _fill(&self.table[slot], p, length, h, <int32_t>self.n)
        self.n += 1
        if <uint64_t>self.n * 2 > self.mask:
            self._grow_table()
        return 0

    cdef inline bint _same_tail(self, int32_t k, const uint8_t *p, Py_ssize_t length) noexcept nogil:
        cdef KeyMeta *m = &self.meta[k]
        return m.length == length and memcmp(
            self.arena + m.off + INLINE, p + INLINE, length - INLINE) == 0

    cdef inline int32_t _find_or_add_hashed(self, const uint8_t *p, Py_ssize_t length,
                                            uint64_t h, const uint8_t *end=NULL) except -1 nogil:
        # the probe key as a slot (tag, length, inline bytes): a slot matches when its 32
        # bytes past the id are equal, and, for a key longer than INLINE, the rest is
        # (``end``: where the key's buffer ends, ``_fill``'s)
        cdef Slot probe
        cdef Slot *s
        cdef uint64_t j = h & self.mask
        cdef int32_t k
        _fill(&probe, p, length, h, 0, end)
        while True:
            s = &self.table[j]
            k = s.id
            if k == -1:
                k = <int32_t>self.n
                self._add(p, length, h, j)
                return k
            if (s.tag == probe.tag and memcmp(&s.length, &probe.length, sizeof(Slot) - 8) == 0
                    and (length <= INLINE or self._same_tail(k, p, length))):
                return k
            j = (j + 1) & self.mask

    cdef inline int32_t _find_or_add(self, const uint8_t *p, Py_ssize_t length) except -1 nogil:
        return self._find_or_add_hashed(p, length, hash_bytes(p, length))

    cdef int _check_ids(self, const int32_t[::1] ids) except -1:
        """Raise ``IndexError`` for an id that is not interned."""
        cdef Py_ssize_t i
        cdef int32_t k
        for i in range(ids.shape[0]):
            k = ids[i]
            if not 0 <= k < self.n:
                raise IndexError(f"key id {k} is not interned (0..{self.n - 1})")
        return 0

    def intern(self, const uint8_t[::1] data, const int64_t[::1] starts, const int32_t[::1] lens):
        """See ``intern.Interner.intern``."""
        cdef Py_ssize_t rows = starts.shape[0], c, i, m
        out = np.empty(rows, dtype=np.int32)
        cdef int32_t[::1] ids = out
        cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
        cdef const uint8_t *end = base + data.shape[0] if base != NULL else NULL
        cdef uint64_t hs[CHUNK]
        with nogil:
            c = 0
            while c < rows:
                m = rows - c if rows - c < CHUNK else CHUNK
                for i in range(m):
                    hs[i] = hash_bytes(base + starts[c + i], lens[c + i], end)
                    if i < PREFETCH:
                        WEIR_PREFETCH(&self.table[hs[i] & self.mask])
                for i in range(m):
                    if i + PREFETCH < m:
                        WEIR_PREFETCH(&self.table[hs[i + PREFETCH] & self.mask])
                    ids[c + i] = self._find_or_add_hashed(
                        base + starts[c + i], lens[c + i], hs[i], end
                    )
                c += m
        return out

    def intern_list(self, list keys):
        """See ``intern.Interner.intern_list``."""
        cdef Py_ssize_t rows = len(keys), i, length
        out = np.empty(rows, dtype=np.int32)
        cdef int32_t[::1] ids = out
        cdef const char *p
        for i in range(rows):
            p = PyUnicode_AsUTF8AndSize(<str?>keys[i], &length)
            ids[i] = self._find_or_add(<const uint8_t *>p, length)
        return out

    def groups(self, const int32_t[::1] ids):
        """See ``intern.Interner.groups``."""
        cdef Py_ssize_t rows = ids.shape[0], i
        out = np.empty(rows, dtype=np.int32)
        cdef int32_t[::1] g = out
        with nogil:
            for i in range(rows):
                g[i] = self.meta[ids[i]].group
        return out

    def partitions(self, const int32_t[::1] ids, int parallelism):
        """See ``intern.Interner.partitions``."""
        if not 1 <= parallelism <= self.max_parallelism:
            raise ValueError(
                f"parallelism={parallelism} must be between 1 and "
                f"max_parallelism={self.max_parallelism}"
            )
        cdef Py_ssize_t rows = ids.shape[0], i
        out = np.empty(rows, dtype=np.int32)
        cdef int32_t[::1] part = out
        cdef int64_t p = parallelism, m = self.max_parallelism
        with nogil:
            for i in range(rows):
                part[i] = <int32_t>(self.meta[ids[i]].group * p // m)
        return out

    def key(self, Py_ssize_t kid):
        """See ``intern.Interner.key``."""
        if not 0 <= kid < self.n:
            raise IndexError(f"key id {kid} is not interned (0..{self.n - 1})")
        cdef KeyMeta m = self.meta[kid]
        return (<char *>self.arena)[m.off:m.off + m.length].decode()

    def keys(self, Py_ssize_t start=0):
        """See ``intern.Interner.keys``."""
        cdef Py_ssize_t i
        cdef KeyMeta m
        for i in range(len(self._names), self.n):
            m = self.meta[i]
            self._names.append(PyUnicode_DecodeUTF8(<char *>self.arena + m.off, m.length, NULL))
        return self._names[start:]

    def prefixes(self, const int32_t[::1] ids):
        """See ``intern.Interner.prefixes``."""
        cdef Py_ssize_t rows = ids.shape[0], i
        cdef int j, n
        cdef uint64_t v
        cdef const uint8_t *p
        self._check_ids(ids)
        out = np.empty(rows, dtype=np.uint64)
        cdef uint64_t[::1] o = out
        with nogil:
            for i in range(rows):
                p = self.arena + self.meta[ids[i]].off
                n = self.meta[ids[i]].length if self.meta[ids[i]].length < 8 else 8
                v = 0
                for j in range(8):
                    v = (v << 8) | (p[j] if j < n else 0)
                o[i] = v
        return out

    def gather_crcs(self, const int32_t[::1] ids):
        """See ``intern.Interner.gather_crcs``: read from each key's meta (prefetched ahead,
        as the ids are in any order), never from its bytes."""
        cdef Py_ssize_t rows = ids.shape[0], i
        self._check_ids(ids)
        crc_a = np.empty(rows, dtype=np.uint32)
        cdef uint32_t[::1] crc = crc_a
        with nogil:
            for i in range(rows):
                if i + PREFETCH < rows:
                    WEIR_PREFETCH(&self.meta[ids[i + PREFETCH]])
                crc[i] = self.meta[ids[i]].crc
        return crc_a

    def gather_keys(self, const int32_t[::1] ids):
        """See ``intern.Interner.gather_keys``.

        Two passes, not one, each prefetching ahead (the ids are in any order): the ids'
        spans, CRCs and key groups (``meta``, each CRC and group kept from when its key was
        new), then their bytes copied (the arena). A key of at most ``SHORT`` bytes is copied
        as one fixed-size move, not a call to ``memcpy``: the arena keeps ``SHORT`` bytes of
        room past its end, the output as many, and the next key overwrites what the move
        wrote past this one."""
        cdef Py_ssize_t rows = ids.shape[0], i
        cdef int64_t total = 0, length
        self._check_ids(ids)
        offsets_a = np.empty(rows + 1, dtype=np.int64)
        crc_a = np.empty(rows, dtype=np.uint32)
        group_a = np.empty(rows, dtype=np.uint16)
        src_a = np.empty(rows, dtype=np.int64)
        cdef int64_t[::1] offsets = offsets_a
        cdef int64_t[::1] src = src_a
        cdef uint32_t[::1] crc = crc_a
        cdef uint16_t[::1] group = group_a
        cdef const KeyMeta *m
        offsets[0] = 0
        with nogil:
            for i in range(rows):
                if i + PREFETCH < rows:
                    WEIR_PREFETCH(&self.meta[ids[i + PREFETCH]])
                m = &self.meta[ids[i]]
                src[i] = m.off
                crc[i] = m.crc
                group[i] = <uint16_t>m.group
                total += m.length
                offsets[i + 1] = total
        out = bytearray(total + SHORT)
        cdef unsigned char *dst = out
        with nogil:
            for i in range(rows):
                if i + PREFETCH < rows:
                    WEIR_PREFETCH(self.arena + src[i + PREFETCH])
                length = offsets[i + 1] - offsets[i]
                if length <= SHORT:
                    memcpy(dst + offsets[i], self.arena + src[i], SHORT)
                else:
                    memcpy(dst + offsets[i], self.arena + src[i], length)
        return bytes(memoryview(out)[:total]), offsets_a, crc_a, group_a
