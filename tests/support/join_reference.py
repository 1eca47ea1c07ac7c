"""A brute-force model of weir's two joins, written from the rules (DESIGN.md "Time", Flink's
``IntervalJoinOperator`` and window operator), not from the engine's functions.

The input is the arrival order the two-input operator sees: ``Arrival(side, key, ts, wm, rec)``,
``wm`` the watermark the record arrived under (the minimum of both inputs'); the input ends
with the final watermark. Results are multisets (``Counter``) of hashable tuples, since the
order of pairs within one firing is the engine's choice.

- Window join, tumbling and sliding: a record's live windows are those of its timestamp with
  ``end - 1 > wm``; a pair ``(l, r)`` of one key joins in every window live for both.
- Window join, sessions: per key, in arrival order, sessions fire when the watermark reaches
  ``end - 1``; a record's ``[t, t + gap)`` merges with every session it touches; late when the
  merged session has fired. A fired session yields all its left × right pairs.
- Interval join: for every pair of one key with ``r.ts - l.ts`` in the bounds (exclusive ones
  moved in by one), emitted unless either record is late (``ts < wm``) or the one that arrived
  first had been cleaned up when the second arrived (its cleanup time ``<= wm``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_TIME = -(1 << 63)
MAX_TIME = (1 << 63) - 1


@dataclass(frozen=True)
class Arrival:
    side: str  # "left" | "right"
    key: str
    ts: int
    wm: int
    rec: Any


def freeze(value: Any) -> Any:
    """A JSON-like value as something hashable, for multisets."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def windows_of(t: int, size: int, slide: int | None) -> list[tuple[int, int]]:
    """Every window ``[k*slide, k*slide + size)`` holding ``t`` (brute force over k)."""
    step = size if slide is None else slide
    k_hi = t // step
    return [
        (k * step, k * step + size)
        for k in range(k_hi - size // step - 1, k_hi + 1)
        if k * step <= t < k * step + size
    ]


def window_join(
    arrivals: Sequence[Arrival], size: int, slide: int | None = None
) -> tuple[Counter[Any], list[Arrival]]:
    """Tumbling (``slide=None``) or sliding window join: pairs ``(key, start, end, left,
    right)`` and the late arrivals."""
    live = [{w for w in windows_of(a.ts, size, slide) if w[1] - 1 > a.wm} for a in arrivals]
    late = [a for a, ws in zip(arrivals, live, strict=True) if not ws]
    pairs: Counter[Any] = Counter()
    for lefts, rights in _sides_by_key(arrivals).values():
        for i in lefts:
            for j in rights:
                a, b = arrivals[i], arrivals[j]
                for w in live[i] & live[j]:
                    pairs[(a.key, w[0], w[1], freeze(a.rec), freeze(b.rec))] += 1
    return pairs, late


def _sides_by_key(arrivals: Sequence[Arrival]) -> dict[Any, tuple[list[int], list[int]]]:
    """Per key, the positions of its left and its right arrivals (the nested loops run per
    key: records of different keys never join)."""
    out: dict[Any, tuple[list[int], list[int]]] = {}
    for i, a in enumerate(arrivals):
        out.setdefault(a.key, ([], []))[a.side == "right"].append(i)
    return out


def session_join(arrivals: Sequence[Arrival], gap: int) -> tuple[Counter[Any], list[Arrival]]:
    """Session window join: pairs ``(key, start, end, left, right)`` and the late arrivals."""
    open_: dict[str, list[tuple[int, int, list[Arrival]]]] = {}
    pairs: Counter[Any] = Counter()
    late: list[Arrival] = []

    def fire(wm: int) -> None:
        for key, sessions in open_.items():
            for s in [s for s in sessions if s[1] - 1 <= wm]:
                sessions.remove(s)
                lefts = [m for m in s[2] if m.side == "left"]
                rights = [m for m in s[2] if m.side == "right"]
                for a in lefts:
                    for b in rights:
                        pairs[(key, s[0], s[1], freeze(a.rec), freeze(b.rec))] += 1

    for a in arrivals:
        fire(a.wm)
        sessions = open_.setdefault(a.key, [])
        start, end, members = a.ts, min(a.ts + gap, MAX_TIME), [a]
        touching = [s for s in sessions if s[0] <= end and s[1] >= start]
        for s in touching:
            start, end, members = min(start, s[0]), max(end, s[1]), members + s[2]
        if end - 1 <= a.wm:
            late.append(a)
            continue
        for s in touching:
            sessions.remove(s)
        sessions.append((start, end, members))
    fire(MAX_TIME)
    return pairs, late


def interval_join(
    arrivals: Sequence[Arrival],
    lower: int,
    upper: int,
    *,
    lower_inclusive: bool = True,
    upper_inclusive: bool = True,
) -> tuple[Counter[Any], list[Arrival]]:
    """Interval join: pairs ``(key, left, right, max ts)`` and the late arrivals."""
    lo = lower if lower_inclusive else lower + 1
    hi = upper if upper_inclusive else upper - 1

    def cleanup(a: Arrival) -> int:
        offset = max(hi, 0) if a.side == "left" else max(-lo, 0)
        return min(a.ts + offset, MAX_TIME)

    late = [a for a in arrivals if a.ts < a.wm]
    pairs: Counter[Any] = Counter()
    for lefts, rights in _sides_by_key(arrivals).values():
        for i in lefts:
            for j in rights:
                left, right = arrivals[i], arrivals[j]
                first, second = (left, right) if i < j else (right, left)
                if left.ts < left.wm or right.ts < right.wm or cleanup(first) <= second.wm:
                    continue
                if lo <= right.ts - left.ts <= hi:
                    key = (left.key, freeze(left.rec), freeze(right.rec), max(left.ts, right.ts))
                    pairs[key] += 1
    return pairs, late
