"""Brute-force models of SQL's outer interval joins and temporal joins, written from their
rules (``engine/sql/outerjoin.py``, ``engine/sql/temporal.py``), not from the functions, over
the arrival order of ``join_reference.Arrival`` (each record with the watermark it arrived
under; the input ends with the final watermark). Rows are multisets of ``(key, left, right)``,
each side a frozen record or None (padded with NULLs).

- Outer interval join: the inner join's pairs (``join_reference.interval_join``'s rule: both
  records on time, ``r.ts - l.ts`` within the bounds, the first to arrive not yet cleaned up),
  plus every on-time record of an outer side that is in no pair.
- Temporal join: left records are probe rows, right ones versions. A probe row at ``t`` above
  the watermark it arrives under (else late) joins, once a later arrival's watermark reaches
  ``t`` (or at the end), the version of its key with the largest ``(ts, arrival)`` at or before
  ``t`` among those that arrived before then; a version is never late. A LEFT join keeps a
  probe row without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from tests.support.join_reference import MAX_TIME, Arrival, freeze


def outer_interval_join(
    arrivals: Sequence[Arrival],
    kind: str,
    lower: int,
    upper: int,
    *,
    lower_inclusive: bool = True,
    upper_inclusive: bool = True,
) -> Counter[Any]:
    """``kind`` LEFT, RIGHT or FULL: the rows ``(key, left, right)``."""
    lo = lower if lower_inclusive else lower + 1
    hi = upper if upper_inclusive else upper - 1

    def cleanup(a: Arrival) -> int:
        offset = max(hi, 0) if a.side == "left" else max(-lo, 0)
        return min(a.ts + offset, MAX_TIME)

    out: Counter[Any] = Counter()
    joined: set[int] = set()
    for i, left in enumerate(arrivals):
        for j, right in enumerate(arrivals):
            if left.side != "left" or right.side != "right" or left.key != right.key:
                continue
            first, second = (left, right) if i < j else (right, left)
            if left.ts < left.wm or right.ts < right.wm or cleanup(first) <= second.wm:
                continue
            if lo <= right.ts - left.ts <= hi:
                out[(left.key, freeze(left.rec), freeze(right.rec))] += 1
                joined |= {i, j}
    for i, a in enumerate(arrivals):
        if i in joined or a.ts < a.wm:
            continue
        if a.side == "left" and kind in ("LEFT", "FULL"):
            out[(a.key, freeze(a.rec), None)] += 1
        if a.side == "right" and kind in ("RIGHT", "FULL"):
            out[(a.key, None, freeze(a.rec))] += 1
    return out


def temporal_join(
    arrivals: Sequence[Arrival], left_join: bool
) -> tuple[Counter[Any], list[Arrival]]:
    """The rows ``(key, probe, version)`` and the late probe rows."""
    out: Counter[Any] = Counter()
    late = []
    for i, a in enumerate(arrivals):
        if a.side != "left":
            continue
        if a.ts <= a.wm:
            late.append(a)
            continue
        fire = next((j for j in range(i + 1, len(arrivals)) if arrivals[j].wm >= a.ts), None)
        seen = arrivals if fire is None else arrivals[:fire]
        valid = [
            (v.ts, j) for j, v in enumerate(seen)
            if v.side == "right" and v.key == a.key and v.ts <= a.ts
        ]  # fmt: skip
        if valid:
            out[(a.key, freeze(a.rec), freeze(seen[max(valid)[1]].rec))] += 1
        elif left_join:
            out[(a.key, freeze(a.rec), None)] += 1
    return out, late
