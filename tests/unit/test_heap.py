"""Freed heap goes back to the OS: memory freed below a block still in use stays in glibc's arena
(and in RSS) until ``trim()``; the background trimmer calls it on its own."""

from __future__ import annotations

import ctypes
import time

from weir.base.procmem import rss_bytes
from weir.engine.runtime import heap


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _libc() -> ctypes.CDLL:
    """glibc's malloc, free and mallinfo2, called directly (Python's allocator keeps its own)."""
    # the process's own symbols, which hold glibc's: find_library("c") would run ldconfig
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = _MallInfo2
    return libc


def test_trim_returns_memory_freed_below_a_live_block() -> None:
    libc = _libc()
    blocks = []
    for _ in range(16_384):  # 64 MiB in 4 KiB blocks: below the mmap threshold, so in the heap
        b = libc.malloc(4096)
        ctypes.memset(b, 1, 4096)  # touched: resident
        blocks.append(b)
    pin = libc.malloc(4096)  # in use above them: the heap's top cannot shrink past it
    for b in blocks:
        libc.free(b)
    before = rss_bytes()
    assert heap.trim(), "this is glibc: malloc_trim must be found"
    after = rss_bytes()
    libc.free(pin)
    assert before - after > 32 * 2**20, f"RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB"


def test_the_trimmer_trims_until_stopped() -> None:
    trimmer = heap.HeapTrimmer(interval_s=0.01).start()
    try:
        deadline = time.monotonic() + 10
        while trimmer.trims < 3:
            assert time.monotonic() < deadline, "the trimmer did not trim within 10 s"
            time.sleep(0.01)
    finally:
        trimmer.stop()
    done = trimmer.trims
    time.sleep(0.05)
    assert trimmer.trims == done, "the trimmer went on after stop()"
