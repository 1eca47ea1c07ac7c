"""Top-N keys of a window, kept by the engine (per worker) so that a query never scans keys.

Ranking is by an aggregate's value, highest first, ties by key: the sort key of an entry is
``(-value, key)``, a total order, so the global top N is exactly the best N of the union of every
worker's own top N (keys are partitioned across workers).

- ``latest``: the most recently fired window, ranked once when it fires (its results are built
  then anyway).
- ``current``: the newest open window, kept incrementally from the keys that changed since the
  last state flush. Each aggregate keeps up to ``2 * K`` candidates and ``bound``, the best sort key
  it ever turned away or evicted: every key outside the candidates ranks after ``bound``. The top
  K of the candidates is exact while its K-th entry ranks before ``bound``; when a value that
  can shrink (a min, a mean, a sum of negatives) breaks that, the window is ranked again from
  memory, at most once a second.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import eq, ge, itemgetter, methodcaller, neg, not_, or_
from typing import Any

from weir.engine.runtime.messages import RankedWindow, TopStatus
from weir.engine.runtime.stored.ranking import (
    TOP_K,
    Rank,
    all_finite,
    best,
    best_of_column,
    best_ranks,
    finite_number,
)
from weir.state.keygroups import canonical_key

RESCAN_S = 1.0
Column = Callable[[str, list[list[Any]]], list[Any]]  # (aggregate, slots) -> its values
Ranked = dict[str, list[tuple[str, int | float]]]  # aggregate -> best (key, value) pairs


class CurrentTop:
    """The incremental top-K of one operator's newest open window, for every numeric aggregate."""

    def __init__(
        self,
        result: Callable[..., dict[str, Any]],
        k: int = TOP_K,
        names: Iterable[str] | None = None,
        column: Column | None = None,
    ) -> None:
        """``names``: the result fields to rank (None: every numeric one); ``column``: their
        values straight from accumulator slots (``FoldPlan.column``), without result records."""
        self._result = result
        self._names = None if names is None else list(names)
        self._column = column
        self.k = k
        self.end: int | None = None
        self._cands: dict[str, dict[str, Rank]] = {}
        self._worst: dict[str, Rank | None] = {}
        self._bound: dict[str, Rank | None] = {}
        self._last_rescan = 0.0

    def observe(self, end: int, bucket: dict[str, list[Any]], keys: Iterable[str]) -> None:
        """``keys`` of the window ending at ``end`` changed (``bucket`` holds its slots)."""
        if end != self.end:
            self.end = end
            self._rescan(bucket)
            return
        changed = list(filter(bucket.__contains__, keys))
        if not changed:
            return
        for name, values in self._columns(end, bucket, changed).items():
            if all_finite(values):
                self._offer_column(name, changed, values)
                continue
            for k, v in zip(changed, values, strict=True):
                if finite_number(v):
                    self._offer(name, k, (-v, k))

    def _columns(
        self, end: int, bucket: dict[str, list[Any]], keys: list[str]
    ) -> dict[str, list[Any]]:
        """The values of ``keys`` by every field ranked."""
        if self._column is not None and self._names is not None:
            slots = list(map(bucket.__getitem__, keys))
            return {name: self._column(name, slots) for name in self._names}
        result = self._result
        rows = [result(k, 0, end, bucket[k], False) for k in keys]
        return {name: list(map(itemgetter(name), rows)) for name in self._names or rows[0]}

    def _offer_column(self, name: str, keys: list[str], values: list[Any]) -> None:
        """Every ``(key, value)`` offered at once: the best ``2 * k`` of the candidates and
        these stay; the best of the rest bounds what was turned away (as one offer at a time
        would keep it: every key outside the candidates ranks after ``bound``). When the
        candidates are full, a key outside them whose value is below the worst one's can only
        be turned away, so only the best of those is looked at."""
        cands = self._cands.setdefault(name, {})
        limit = 2 * self.k
        if len(cands) >= limit:
            floor = -max(cands.values())[0]
            keep = list(map(or_, map(ge, values, repeat(floor)), map(cands.__contains__, keys)))
            if not all(keep):
                away = list(map(not_, keep))
                out = list(compress(values, away))
                top = max(out)
                at_top = compress(compress(keys, away), map(eq, out, repeat(top)))
                self._turn_away(name, (-top, min(at_top)))
                keys, values = list(compress(keys, keep)), list(compress(values, keep))
        cands.update(zip(keys, zip(map(neg, values), keys, strict=True), strict=True))
        self._worst[name] = None
        if len(cands) > limit:
            ranked = heapq.nsmallest(limit + 1, cands.values())
            self._cands[name] = {r[1]: r for r in ranked[:limit]}
            self._turn_away(name, ranked[limit])

    def _offer(self, name: str, key: str, rank: Rank) -> None:
        cands = self._cands.setdefault(name, {})
        if key in cands or len(cands) < 2 * self.k:
            cands[key] = rank
            self._worst[name] = None  # recomputed when needed
            return
        worst = self._worst.get(name)
        if worst is None:
            worst = self._worst[name] = max(cands.values())
        if rank < worst:
            cands[key] = rank
            evicted = max(cands, key=cands.__getitem__)
            self._turn_away(name, cands.pop(evicted))
            self._worst[name] = max(cands.values())
        else:
            self._turn_away(name, rank)

    def _turn_away(self, name: str, rank: Rank) -> None:
        bound = self._bound.get(name)
        if bound is None or rank < bound:
            self._bound[name] = rank

    def _rescan(self, bucket: dict[str, list[Any]]) -> None:
        """Rank the whole window again, a column at a time (a new newest window, or a bound
        that a shrinking value broke)."""
        self._last_rescan = time.monotonic()
        self._cands, self._worst, self._bound = {}, {}, {}
        if not bucket:
            return
        keys = list(bucket)
        limit = 2 * self.k
        for name, values in self._columns(self.end or 0, bucket, keys).items():
            if all_finite(values):
                ranked = best_ranks(keys, values, limit + 1)
            else:
                pairs = ((-v, k) for k, v in zip(keys, values, strict=True) if finite_number(v))
                ranked = heapq.nsmallest(limit + 1, pairs)
            if ranked:
                self._cands[name] = {r[1]: r for r in ranked[:limit]}
                self._bound[name] = ranked[limit] if len(ranked) > limit else None

    def top(self, bucket: dict[str, list[Any]] | None) -> Ranked:
        """Every numeric aggregate's best K ``(key, value)``; ranks again when it must."""
        if self.end is None:
            return {}
        out: Ranked = {}
        for name, cands in self._cands.items():
            ranked = sorted(cands.values())[: self.k]
            bound = self._bound.get(name)
            exact = bound is None or len(ranked) < self.k or ranked[-1] < bound
            if not exact and bucket is not None:
                if time.monotonic() - self._last_rescan >= RESCAN_S:
                    self._rescan(bucket)
                    return self.top(None)
            out[name] = [(k, -v) for v, k in ranked]
        return out


def ranked_results(results: list[dict[str, Any]], names: Iterable[str], k: int = TOP_K) -> Ranked:
    """The best ``k`` keys of a fired window by every numeric aggregate in ``names``. Keys are
    ranked in their canonical form (the NULL key, ``None`` in a result, as ``NULL_KEY``), as a
    top-N lists them: the form a URL takes."""
    keys = list(map(canonical_key, map(itemgetter("key"), results)))
    return ranked_columns(keys, {n: list(map(methodcaller("get", n), results)) for n in names}, k)


def ranked_columns(keys: list[str], columns: dict[str, list[Any]], k: int = TOP_K) -> Ranked:
    """``ranked_results`` of a window given as its keys and a column of values per aggregate."""
    out: Ranked = {}
    for name, column in columns.items():
        if all_finite(column):
            if column:
                out[name] = best_of_column(keys, column, k)
            continue
        pairs = [(key, v) for key, v in zip(keys, column, strict=True) if finite_number(v)]
        if pairs:
            out[name] = list(best(pairs, k))
    return out


class WindowTops:
    """What a window operator reports of its top-N keys: the window that fired last, ranked
    when it fires, and (tumbling windows) the newest open one, kept by ``CurrentTop`` from the
    keys each state flush wrote."""

    def __init__(
        self,
        result: Callable[..., dict[str, Any]],
        aggregates: Iterable[str],
        start_of: Callable[[int], int],
        track_current: bool,
        column: Column | None = None,
    ) -> None:
        self._names = list(aggregates)
        self._start_of = start_of
        self._column = column
        tracker = CurrentTop(result, names=self._names, column=column)
        self.current = tracker if track_current else None
        self.latest: RankedWindow | None = None

    def fired(self, start: int, end: int, results: list[dict[str, Any]]) -> None:
        """The window ``[start, end)`` fired with ``results`` (one per key)."""
        if not results or (self.latest is not None and self.latest["end"] > end):
            return
        self.latest = {"start": start, "end": end, "by": ranked_results(results, self._names)}

    def fired_slots(self, start: int, end: int, bucket: dict[str, list[Any]]) -> None:
        """``fired`` for a window whose result records were not built: ranked from its slots
        (needs ``column``)."""
        if not bucket or (self.latest is not None and self.latest["end"] > end):
            return
        assert self._column is not None
        slots = list(bucket.values())
        columns = {name: self._column(name, slots) for name in self._names}
        self.latest = {"start": start, "end": end, "by": ranked_columns(list(bucket), columns)}

    def fired_ranked(self, start: int, end: int, keys: int, ranked: Ranked) -> None:
        """``fired`` for a window of ``keys`` keys, ranked already (``colrank``)."""
        if not keys or (self.latest is not None and self.latest["end"] > end):
            return
        self.latest = {"start": start, "end": end, "by": ranked}

    def flushed(self, buckets: dict[int, dict[str, list[Any]]], dirty: dict[int, set[str]]) -> None:
        """State is about to be written: ``dirty`` keys of the open windows in ``buckets``."""
        if self.current is not None and buckets:
            newest = max(buckets)
            changed = dirty.get(newest)
            if changed:
                self.current.observe(newest, buckets[newest], changed)

    def status(self, buckets: dict[int, dict[str, list[Any]]]) -> TopStatus:
        current: RankedWindow | None = None
        tracker = self.current
        end = tracker.end if tracker is not None else None
        if tracker is not None and end is not None and end in buckets:
            current = {"start": self._start_of(end), "end": end, "by": tracker.top(buckets[end])}
        return {"latest": self.latest, "current": current}
