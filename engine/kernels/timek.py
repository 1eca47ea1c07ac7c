"""Pure-Python twin of the time kernels (``_timek.pyx``): per-record watermarks, window ends and
lateness for a whole column of event times, exactly as ``engine.watermarks`` and
``engine.windows`` compute them one value at a time (Python ints, then clamped to 64 bits).

Columns are numpy ``int64`` arrays; lateness codes are ``uint8``: ``ON_TIME`` (the window has not
fired: ``end - 1 > watermark``), ``ALLOWED`` (fired, within allowed lateness: an update) and
``LATE`` (``end - 1 + lateness <= watermark``: the late output).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.engine.windows.base import MAX_TIME, MIN_TIME

ON_TIME, ALLOWED, LATE = 0, 1, 2
I64 = np.dtype(np.int64)
Array = Any  # numpy.ndarray; kept loose so both implementations type alike


def watermarks(ts: Array, max_seen: int, bound_ms: int) -> tuple[Array, int]:
    """The watermark each record arrives under (``max(seen before) - bound - 1``, at least
    ``MIN_TIME``) and the split's new maximum event time.

    Args:
        ts: event times, ``int64``.
        max_seen: the split's maximum so far (``MIN_TIME`` when none).
        bound_ms: the out-of-orderness bound.

    Returns:
        ``(wms, new_max)``: ``wms[i]`` is the watermark before record ``i``.
    """
    out = []
    running = max_seen
    shift = bound_ms + 1
    for t in ts.tolist():
        w = running - shift
        out.append(w if w > MIN_TIME else MIN_TIME)
        if t > running:
            running = t
    return np.array(out, dtype=I64), running


def tumbling_ends(ts: Array, size_ms: int, offset_ms: int) -> Array:
    """The end of the tumbling window holding each time, ``t - (t - offset) mod size + size``,
    saturated at ``MAX_TIME`` (``TumblingWindows.window_ends``)."""
    s, o = size_ms, offset_ms
    ends = [t - (t - o) % s + s for t in ts.tolist()]
    return np.array([e if e < MAX_TIME else MAX_TIME for e in ends], dtype=I64)


def sliding_expand(ts: Array, size_ms: int, slide_ms: int, offset_ms: int) -> tuple[Array, Array]:
    """Every sliding window of each time, latest first (``SlidingWindows.expand``): ``(ends,
    origin)``, one entry per (record, window) pair, ``origin`` the record's index; the windows
    ending at or past ``MAX_TIME`` are one, ending there."""
    s, d, o = size_ms, slide_ms, offset_ms
    ends: list[int] = []
    origin: list[int] = []
    for i, t in enumerate(ts.tolist()):
        start = t - (t - o) % d
        mine: list[int] = []
        while start > t - s:
            mine.append(start + s)
            start -= d
        if mine[0] >= MAX_TIME:
            mine = [MAX_TIME, *(e for e in mine if e < MAX_TIME)]
        ends += mine
        origin += [i] * len(mine)
    return np.array(ends, dtype=I64), np.array(origin, dtype=I64)


def lateness(ends: Array, wms: Array, allowed_ms: int) -> Array:
    """Per (record, window): ``ON_TIME``, ``ALLOWED`` or ``LATE`` (``windows.is_late``)."""
    codes = []
    for e, w in zip(ends.tolist(), wms.tolist(), strict=True):
        if e - 1 > w:
            codes.append(ON_TIME)
        else:
            c = e - 1 + allowed_ms
            codes.append(LATE if (c if c < MAX_TIME else MAX_TIME) <= w else ALLOWED)
    return np.array(codes, dtype=np.uint8)


__all__ = ["ALLOWED", "LATE", "MIN_TIME", "ON_TIME", "lateness", "sliding_expand", "watermarks"]
