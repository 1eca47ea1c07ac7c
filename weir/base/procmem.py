"""A process's resident memory, as the kernel counts it (``/proc/<pid>/statm``)."""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes(pid: int | None = None) -> int:
    """The resident set of process ``pid`` (this one by default) in bytes; 0 where the system
    has no ``/proc`` (macOS) or the process is gone.

    Example:
        >>> rss_bytes() > 0
        True
    """
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


__all__ = ["rss_bytes"]
