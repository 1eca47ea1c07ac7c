"""Giving freed heap back to the OS, so a long-running process's RSS follows what it uses.

glibc's malloc keeps memory that was freed inside its arenas (one per thread that allocated,
up to eight per core) and returns it to the OS only from the top of each heap. RocksDB churns
there: each API reader reopens its secondary instance once per primary flush (every checkpoint),
allocating table readers and a replayed memtable and freeing the previous ones from whichever
request thread did it, so free pages pile up in the arenas while the bytes in use stay flat.
Flink's Docker images preload jemalloc against the same fragmentation with RocksDB; a Python
wheel cannot, so ``HeapTrimmer`` calls ``malloc_trim(0)`` every few seconds from a daemon
thread, which hands the free pages of every arena back (``MADV_DONTNEED``; ctypes releases the
GIL, and each arena is locked only while it is trimmed). Elsewhere than glibc it does nothing.
The README ("Guarantees and failure behaviour", the soak) has the measurements.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

TRIM_INTERVAL_S = 5.0
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # mallopt parameters (malloc.h)
MMAP_THRESHOLD = 1 << 20
# Fixing the mmap threshold also fixes the trim threshold at glibc's 128 KiB: every free that
# leaves that much at the top of the main heap shrinks it, and the next allocations fault the
# pages in again, zeroed. A worker at 1M keys spent ~0.15 CPU-s of 1.9 so (page faults and
# clearing, on a 2M-event run). So the heap grows by TOP_PAD at a time and shrinks only past
# TRIM_THRESHOLD; the trimmer still hands every free page back every TRIM_INTERVAL_S.
TOP_PAD = 32 << 20
TRIM_THRESHOLD = 64 << 20


@functools.cache
def _libc_function(name: str, *argtypes: Any) -> Any | None:
    """The C library's ``name`` (looked up among the process's symbols once, when first
    needed: no ``find_library`` subprocess at import), or None where it has none (musl,
    macOS)."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


def _malloc_trim() -> Any | None:
    return _libc_function("malloc_trim", ctypes.c_size_t)


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Serve allocations of ``size`` bytes and more with their own mappings, for good.

    glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after
    RocksDB frees its first memtable block (8 MiB) every large buffer after it (write batches,
    memtable blocks, record batches) comes from the heap and leaves holes there that neither
    ``free`` nor ``malloc_trim`` can give back while a small block sits on the same pages.
    Setting the threshold turns that adjustment off (``mallopt(3)``): blocks of a MiB or more
    are unmapped when freed. The heap's top pad and trim threshold are set with it (see
    ``TOP_PAD``). False where the C library has no ``mallopt``."""
    mallopt = _libc_function("mallopt", ctypes.c_int, ctypes.c_int)
    if mallopt is None:
        return False
    mallopt(_M_TOP_PAD, TOP_PAD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    return bool(mallopt(_M_MMAP_THRESHOLD, size))


def trim() -> bool:
    """Return free heap pages to the OS now; False where the C library cannot."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


class HeapTrimmer:
    """A daemon thread that calls ``trim()`` every ``interval_s`` until stopped."""

    def __init__(self, interval_s: float = TRIM_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.trims = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> HeapTrimmer:
        if self._thread is None and _malloc_trim() is not None:
            self._thread = threading.Thread(target=self._run, name="weir-heap-trim", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            trim()
            self.trims += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


_PROCESS: HeapTrimmer | None = None


def trim_in_background() -> HeapTrimmer:
    """This process's trimmer, started on first call (``weir run``, ``weir api``, workers)."""
    global _PROCESS
    if _PROCESS is None:
        fix_mmap_threshold()
        _PROCESS = HeapTrimmer().start()
    return _PROCESS


__all__ = [
    "TOP_PAD",
    "TRIM_INTERVAL_S",
    "TRIM_THRESHOLD",
    "HeapTrimmer",
    "fix_mmap_threshold",
    "trim",
    "trim_in_background",
]
