"""Sliding windows on panes: each record is folded once, into its pane (a tumbling window of
``gcd(size, slide)``); a window is composed from its ``size / pane`` panes when it fires, then
materialised like any fired window (RocksDB, upserts within lateness). A pane leaves memory and
RocksDB once the last window holding it has fired.

Lateness is still judged per window: a record joins its pane when any of its windows is still
open (only open windows read panes); a window that has fired but is within lateness is updated
on its own, as with tumbling windows; a record is late only when all its windows are. The API
composes open windows from the stored panes, so live partial aggregates stay queryable.
"""

from __future__ import annotations

from typing import Any

from weir.engine.runtime.operators.cellwrites import CellPart
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.statekeys import KeyPrefixes
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.windows import SlidingWindows, is_late


class SlidingRuntime(WindowRuntime):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assigner = self.op.assigner
        assert isinstance(assigner, SlidingWindows)
        self._sliding = assigner
        self._psid = self.op.pane_state_id
        self._fired_upto: int | None = None  # every window ending at or before this is done
        self._pane_deletes: list[tuple[int, list[str]]] = []  # (pane end, its keys)
        self._trace: list[int] = []
        self._pane_prefixes = KeyPrefixes(self._psid, self._max_par)
        self._pane_prefix = self._pane_prefixes.prefix

    # ``self.buckets`` holds panes: {pane end: {key: slots}}; ``self._dirty`` their changes

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        admitted = self._admit(keys, recs, ts, wms)
        if admitted is None:
            return
        keys, recs, ts, wms, cols = admitted
        sliding = self._sliding
        panes = sliding.pane_ends(ts)
        first = sliding.first_ends_after(ts)
        if min(first) - 1 > max(wms) or all(f - 1 > w for f, w in zip(first, wms, strict=True)):
            # every window of every record is open: none of them fires before the batch ends
            # (a window the watermark passes within it holds none of them), so all fold at once
            self.plan.fold(self.buckets, self._dirty, keys, panes, *cols, recs)
            return
        self._trace = trace or []
        fold = self.plan.fold
        pk: list[str] = []
        pp: list[int] = []
        pc: list[list[Any]] = [[] for _ in cols]
        pr: list[Any] = []
        next_due, next_final = self._next_due(), self._next_final()
        for i, (k, t, w, rec) in enumerate(zip(keys, ts, wms, recs, strict=True)):
            if w >= next_due - 1 or w >= next_final:
                # the watermark passed a window's end or lateness: its timers run before going on
                if pk:
                    fold(self.buckets, self._dirty, pk, pp, *pc, pr)
                    pk, pp, pc, pr = [], [], [[] for _ in cols], []
                self._fire_upto(w)
                next_due, next_final = self._next_due(), self._next_final()
            if first[i] - 1 > w:  # every window of this record is open: it joins its pane
                pk.append(k)
                pp.append(panes[i])
                for c, col in zip(pc, cols, strict=True):
                    c.append(col[i])
                pr.append(rec)
                continue
            vals = [c[i] for c in cols]
            if self._update_fired(k, t, w, rec, vals):
                pk.append(k)
                pp.append(panes[i])
                for c, v in zip(pc, vals, strict=True):
                    c.append(v)
                pr.append(rec)
            next_final = self._next_final()
        if pk:
            fold(self.buckets, self._dirty, pk, pp, *pc, pr)

    def _update_fired(self, key: str, t: int, w: int, rec: Any, vals: list[Any]) -> bool:
        """A record under watermark ``w`` some of whose windows fired: those within their
        lateness are updated now, earliest first; True when another is still open (the record
        joins its pane). Late only when all its windows are."""
        taken = joined = False
        for e in reversed(self._sliding.window_ends_of(t)):
            if e - 1 > w:
                joined = True
            elif not is_late(e, self._lateness, w):
                self._apply_allowed(key, e, rec, vals)
                taken = True
        if not joined and not taken:
            self._late.add(self.op.name, key, t, w, rec)
        return joined

    def _next_due(self) -> int:
        """The end of the next window the watermark can pass (ends are aligned to the slide)."""
        if self._fired_upto is None:
            return MIN_WATERMARK
        return self._sliding.first_end_at_or_after(self._fired_upto + 1)

    def _next_final(self) -> int:
        """The time of the next final emission's timer (a fired window's lateness ending)."""
        if not self.awaiting_final:
            return MAX_WATERMARK
        return min(self.awaiting_final) - 1 + self._lateness

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        self._trace = self._move_time(watermark, data_watermark, trace) or []
        self._fire_upto(self.watermark)

    def _fire_upto(self, wm: int) -> None:
        """Fire every window the watermark ``wm`` has passed that holds a pane, and emit final
        the fired ones past their lateness, in their timers' order (``timer_order``); a window
        is final at once if its lateness had passed at the first watermark that reached it."""
        due: set[int] = set()
        holding = self._sliding.ends_holding_pane
        for p in self.buckets:
            for e in holding(p):
                if e - 1 > wm:
                    break
                if self._fired_upto is None or e > self._fired_upto:
                    due.add(e)
        self._run_timers(sorted(due), self._trace, wm)  # (late updates were applied at once)
        # every window ending at or before wm + 1 has had its turn, empty or not
        if self._fired_upto is None or wm + 1 > self._fired_upto:
            self._fired_upto = wm + 1
        self._evict(wm)

    def _fire_due(self, end: int, wm: int) -> None:
        self._fire(end, self._compose(end), wm)

    def _compose(self, end: int) -> dict[str, list[Any]]:
        """The window ending at ``end``: its panes merged, per key."""
        merged: dict[str, list[Any]] = {}
        merge_bucket = self.plan.merge_bucket
        for p in self._sliding.panes_of(end):
            pane = self.buckets.get(p)
            if pane:
                merge_bucket(merged, pane)
        return merged

    def _fire(self, end: int, bucket: dict[str, list[Any]], wm: int) -> None:
        """Emit a composed window and materialise it (``_dirty`` here tracks panes)."""
        start = self._sliding.start_of(end)
        final = is_late(end, self._lateness, wm)
        self._results_of(start, end, bucket, final)
        self._materialise(end, bucket, None)  # composed now: RocksDB has none of it
        if not final:
            self.awaiting_final[end] = bucket

    def _evict(self, wm: int) -> None:
        """Panes whose last window has fired are no longer needed."""
        for p in [p for p in self.buckets if self._last_end(p) - 1 <= wm]:
            self._pane_deletes.append((p, list(self.buckets.pop(p))))
            self._dirty.pop(p, None)

    def _last_end(self, pane_end: int) -> int:
        """The end of the last window holding pane ``[pane_end - pane, pane_end)``."""
        return self._sliding.window_ends_of(pane_end - 1)[0]

    @property
    def open_windows(self) -> int:
        return sum(len(b) for b in self.buckets.values())

    def _delta(self, warm: bool = True) -> StateDelta:
        """Dirty panes (under the pane state id), fired windows, timers, evicted panes; a fresh
        generation begins. Panes' slots are copied (see ``WindowRuntime._delta``)."""
        frozen = self._freeze_dirty(self._psid) + self._take_fired()
        drops = [(self._psid, p, keys) for p, keys in self._pane_deletes]
        self._pane_deletes = []
        puts, self._writes = self._writes, {}
        part = CellPart(
            self._cells, self._psid, self.plan.width, frozen, drops, final=self._final()
        )
        return StateDelta(puts, [], [], self._pane_prefix, cells=part)

    def _restore_windows(self, wm: int) -> None:
        """Stored panes are those some open window still needs; stored windows have fired."""
        for key, pane, slots in self.stored_windows(self._psid, seed=True):
            self.buckets.setdefault(pane, {})[key] = slots
        for key, end, slots in self.stored_windows(self._sid, seed=True):
            if not is_late(end, self._lateness, wm):
                self.awaiting_final.setdefault(end, {})[key] = slots
        self._fired_upto = None if wm == MIN_WATERMARK else wm + 1
