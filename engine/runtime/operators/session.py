"""The session window operator: per key, the sessions that can still change live in memory,
sorted by start; each record is merged into them one at a time (merging needs the record's
predecessor), with lateness judged on the *merged* session, as Flink does.

- A record's window is ``[t, t + gap)`` (the gap fixed, or the record's own: a record whose
  gap is unusable goes to the dead letters; an end past ``MAX_TIME`` is ``MAX_TIME``); it
  merges with every live session it overlaps or touches (Flink's ``TimeWindow.intersects``:
  ``start <= other.end and end >= other.start``), so events at most the gap apart are one
  session. If the merged session is past its allowed
  lateness the record is late and changes nothing (even when its aggregated fields could not be
  folded: the late decision comes first; a record that is not late and cannot be folded goes
  to the dead letters and changes nothing either).
- A session fires when the watermark reaches ``end - 1`` (its first emission is final if its
  lateness had passed by then too); a merge into a fired session emits it again, ``final:
  false``; once the watermark passes ``end - 1 + lateness`` it is emitted final and forgotten,
  so later records start new sessions.
- A key's sessions that fell due within the batch fire *before* that key's next record is
  merged, at the first watermark of the batch's trace that reached them: the emission sequence of
  every session is the one a record-at-a-time engine produces.
- RocksDB holds each live session under its end (the namespace); when a merge moves the end, the
  old entry is deleted in the same write batch.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.stored.codec import decode_session, encode_session
from weir.engine.windows import SessionWindows, is_late
from weir.state import layout


class Session:
    """A live session of one key; ``stored`` is the end RocksDB holds it under (or None)."""

    __slots__ = ("start", "end", "slots", "fired", "final", "stored")

    def __init__(self, start: int, end: int, slots: list[Any]) -> None:
        self.start = start
        self.end = end
        self.slots = slots
        self.fired = False
        self.final = False
        self.stored: int | None = None


class SessionRuntime(WindowRuntime):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assigner = self.op.assigner
        assert isinstance(assigner, SessionWindows)
        self._sessions = assigner
        self._gap = assigner.gap_ms  # None: a gap per record (``assigner.gap_of``)
        self.sessions: dict[str, list[Session]] = {}
        self._dirty_keys: set[str] = set()
        self._deletes: list[tuple[str, int]] = []
        self._trace: list[int] = []

    @property
    def open_windows(self) -> int:
        return sum(1 for live in self.sessions.values() for s in live if not s.fired)

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        if not keys:
            return
        cols = self.plan.columns(recs)
        bad: list[tuple[str, str] | None] = []
        if cols is None:  # judged one by one, after the late decision (``_merge``)
            bad = [self.plan.bad_field(r) for r in recs]
            cols = self.plan.loose_columns(recs)
        self.records_in += len(keys)
        if self.processing_time:
            ts, wms = self.clock(len(keys))
            trace = None
        self._trace = trace or []
        gap = self._gap
        gap_of = None if gap is not None else self._sessions.gap_of
        for i, (k, t, w, rec) in enumerate(zip(keys, ts, wms, recs, strict=True)):
            if gap_of is not None:
                gap, why = gap_of(rec)
                if why is not None:
                    self._dead.add(f"gap:{self.op.name}", "unusable-gap", why, rec)
                    continue
            assert gap is not None
            self._merge(k, t, w, rec, [c[i] for c in cols], gap, bad[i] if bad else None)

    def _merge(
        self,
        key: str,
        t: int,
        wm: int,
        rec: Any,
        vals: list[Any],
        gap: int,
        bad: tuple[str, str] | None,
    ) -> None:
        live = self.sessions.get(key, [])
        if live:
            self._settle(key, live, wm)
        lo, hi = t, SessionWindows.end_of(t, gap)
        overlapping = [s for s in live if s.start <= hi and lo <= s.end]  # touching merges
        start = min([lo, *(s.start for s in overlapping)])
        end = max([hi, *(s.end for s in overlapping)])
        if is_late(end, self._lateness, wm):  # even merged, the session is past its lateness
            self._late.add(self.op.name, key, t, wm, rec)
            return
        if bad is not None:  # not late, and its fields cannot be folded: nothing merges
            self._dead.add(f"aggregate:{self.op.name}", *bad, rec)
            return
        slots: list[Any] | None = None
        for s in overlapping:
            slots = s.slots if slots is None else self.plan.merge(slots, s.slots)
        bucket: dict[str, list[Any]] = {} if slots is None else {key: slots}
        self.plan.fold({end: bucket}, {}, [key], [end], *[[v] for v in vals], [rec])
        merged = Session(start, end, bucket[key])
        for s in overlapping:
            if s.stored is not None:
                self._deletes.append((key, s.stored))
        rest = [s for s in live if all(s is not o for o in overlapping)]
        rest.append(merged)
        rest.sort(key=lambda s: s.start)
        self.sessions[key] = rest
        self._dirty_keys.add(key)
        if end - 1 <= wm:  # behind the watermark, within lateness: emitted now
            merged.fired = True
            self._emit(key, start, end, merged.slots, False)

    def _settle(self, key: str, live: list[Session], wm: int) -> None:
        """Fire this key's sessions that fell due, then emit final and forget those whose
        lateness has passed (later records start new sessions, as in Flink)."""
        lateness = self._lateness
        for s in live:
            if not s.fired and s.end - 1 <= wm:
                s.fired = True
                s.final = is_late(s.end, lateness, self._fired_at(s.end, wm))
                self._emit(key, s.start, s.end, s.slots, s.final)
        done = [s for s in live if is_late(s.end, lateness, wm)]
        if not done:
            return
        for s in done:
            if not s.final:
                self._emit(key, s.start, s.end, s.slots, True)
            self._store(key, s)
            self._add_timers(s.end, [key])
        live[:] = [s for s in live if not is_late(s.end, lateness, wm)]
        if not live:
            self.sessions.pop(key, None)

    def _fired_at(self, end: int, wm: int) -> int:
        """The first watermark of the batch's trace that reached ``end - 1``."""
        i = bisect_left(self._trace, end - 1)
        return self._trace[i] if i < len(self._trace) and self._trace[i] <= wm else wm

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        trace = self._move_time(watermark, data_watermark, trace)
        self._trace = trace or [self.watermark]
        wm = self.watermark
        for key in list(self.sessions):
            live = self.sessions[key]
            if any(s.end - 1 <= wm for s in live):
                self._settle(key, live, wm)

    def _restore_windows(self, wm: int) -> None:
        """Sessions within their lateness go back to memory, fired or not."""
        for key, end, raw in self.stored_rows(self._sid):
            if not is_late(end, self._lateness, wm):
                start, slots = decode_session(raw)
                s = Session(start, end, slots)
                s.fired = end - 1 <= wm
                s.stored = end
                self.sessions.setdefault(key, []).append(s)
        for live in self.sessions.values():
            live.sort(key=lambda s: s.start)

    def _purged(self, kg: int, end: int, keys: list[str]) -> list[bytes]:
        """Sessions are rows (their start is stored with them): one delete a key."""
        ns = self._namespace(end)
        return [layout.key_prefix(kg, self._sid, k.encode()) + ns for k in keys]

    def _store(self, key: str, s: Session) -> None:
        if s.stored is not None and s.stored != s.end:
            self._deletes.append((key, s.stored))
        self._writes[self._prefix(key)[1] + self._namespace(s.end)] = encode_session(
            s.start, s.slots
        )
        s.stored = s.end

    def _delta(self, warm: bool = True) -> StateDelta:
        """Live sessions of changed keys, finalized ones, and deletes of superseded ends
        (applied before the puts, so an end can be reused in the same batch); a fresh
        generation begins. A live session's value is a new list (``[start, *slots]``), a copy
        the fold cannot change, unless a user-defined accumulator may change in place: then it
        is encoded now. ``warm`` is not used: the rows' prefixes are made as they are written."""
        rows: list[tuple[str, bytes, list[Any]]] = []
        for key in self._dirty_keys:
            for s in self.sessions.get(key, ()):
                if s.stored is not None and s.stored != s.end:
                    self._deletes.append((key, s.stored))
                ns = self._namespace(s.end)
                if self._numbers:
                    rows.append((key, ns, [s.start, *s.slots]))
                else:
                    self._writes[self._prefix(key)[1] + ns] = encode_session(s.start, s.slots)
                s.stored = s.end
        self._dirty_keys = set()
        deletes = [self._prefix(k)[1] + self._namespace(e) for k, e in self._deletes]
        self._deletes = []
        puts, self._writes = self._writes, {}
        return StateDelta(puts, rows, deletes, self._prefix)
