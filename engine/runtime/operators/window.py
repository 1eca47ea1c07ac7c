"""The keyed window operator: pre-aggregates batches, fires on watermarks, keeps state in RocksDB.

Configuration: the operator definition, its key-group range, retention.
Transient: ``buckets`` holds the accumulators of *open* windows, ``{window end: {key: slots}}``,
and ``awaiting_final`` those of fired windows still within allowed lateness. Memory is
authoritative for every window that can still change, so the hot path never reads RocksDB: a
batch is folded in memory, firing a window end pops one bucket, and dirty entries reach RocksDB
every flush, where the API reads them through its own secondary instance.
Checkpointed: RocksDB itself (window state and cleanup timers). At a barrier ``snapshot`` freezes
what RocksDB lacks as one generation (``delta.py``), which the checkpoint's thread writes before
it takes RocksDB's checkpoint; the worker writes nothing newer until then.

Lateness is judged per record against the watermark it arrived under (``wms``), never against the
batch's end, so batching changes no result: on-time records are folded; records for a window that
has fired but is within allowed lateness update it one by one, in arrival order, each emitting an
update; records later than that go to the late output untouched. The late decision comes first,
as in Flink: a late record goes to the late output even when its aggregated fields could not be
folded (a record that is not late and cannot be folded goes to the dead letters). A record in a
gap between sliding windows (slide > size) belongs to no window and changes nothing.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import Any, cast

import numpy as np

from weir.engine.nodes import WindowNode
from weir.engine.runtime.messages import TopStatus
from weir.engine.runtime.operators.cellwrites import (
    CellLog,
    CellPart,
    Frozen,
    bucket_entries,
    cell_entries,
    flat_copy,
    migrate_rows,
    stored_window_in,
)
from weir.engine.runtime.operators.delta import StateDelta, slots_are_numbers
from weir.engine.runtime.operators.statekeys import KeyPrefixes, Namespaces
from weir.engine.runtime.operators.topn import WindowTops
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import (
    BUCKET_TIMER,
    decode_bucket_timer,
    decode_keys,
    encode_bucket_timer,
    encode_keys,
    uses_panes,
)
from weir.engine.runtime.stored.fold import FoldPlan, take_columns
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.windows import CumulateWindows, SlidingWindows, TumblingWindows, is_late
from weir.state import cells, layout, slotpack
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange

Buckets = dict[int, dict[str, list[Any]]]
MAX_UNRANKED = 100  # written generations whose keys the top-N has not seen yet
# the newest window's top-N learns of changed keys at most this often: a status is read every
# 100 ms, and ranking every key changed since the last read cost up to a sixth of the loop
RANK_INTERVAL_S = 1.0
FIRE, FINAL, UPDATE = 0, 1, 2  # what ``timer_order`` lists: a firing, a final emission, an update
# a late-but-allowed record: key, window end, record, its aggregated values, the watermark it
# arrived under (it updates its window after the timers that watermark had passed)
Allowed = tuple[str, int, Any, list[Any], int]


class WindowRuntime:
    def __init__(
        self,
        op: WindowNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
        purge_interval_s: float = 1.0,
    ) -> None:
        # configuration
        self.op = op
        self.plan = FoldPlan(op.aggregates, op.name)  # result records name their operator
        self._numbers = slots_are_numbers(op.aggregates)
        # sessions have their own runtime (session.py), which never uses this
        self._assigner = cast(TumblingWindows | SlidingWindows | CumulateWindows, op.assigner)
        self._lateness = op.allowed_lateness_ms
        self._state, self._range, self._max_par = state, key_groups, max_parallelism
        self._late, self._dead = late, dead
        self._retention = retention_ms
        self._purge_interval = purge_interval_s
        self._sid = op.state_id
        self._tsid = op.timer_state_id
        self.processing_time = op.assigner.time == "processing"
        # False when nothing reads the results (no sink: the windows are only queried): firing
        # builds no result record; the worker decides, every other caller drains them
        self.emits = True
        # transient
        self.buckets: Buckets = {}
        self.awaiting_final: Buckets = {}
        self._dirty: dict[int, set[str]] = {}
        self._unranked: list[dict[int, set[str]]] = []  # frozen dirty keys the top-N has not seen
        self._ranked_at = 0.0
        self._writes: dict[bytes, bytes] = {}  # encoded already: timers (sessions: rows)
        self._cells = CellLog(max_parallelism)
        self._fired: list[Frozen] = []  # fired windows' rows, copied, for the next generation
        self._late_rows: dict[int, dict[str, list[Any]]] = {}  # allowed-late updates, by end
        # late-but-allowed (key, window end, record, values, the watermark it arrived under)
        self._allowed: list[Allowed] = []
        self._timer_ends: set[int] = set()
        self._timer_seq = 0  # strictly increasing: two flushes never share a timer entry
        self._prefixes = KeyPrefixes(self._sid, max_parallelism)
        self._prefix = self._prefixes.prefix
        self._namespace = Namespaces().namespace
        self._last_purge = 0.0
        self.results: list[dict[str, Any]] = []
        # top-N: the last fired window's, and the newest open one's (tumbling windows only)
        self.tops = WindowTops(
            self.plan.result,
            self.plan.ranked,
            self._start_of,
            self._tracks_current(),
            self.plan.column,
        )
        # progress
        self.watermark = MIN_WATERMARK
        self.data_watermark = MIN_WATERMARK
        self.records_in = 0
        self.results_out = 0

    @property
    def open_windows(self) -> int:
        return sum(len(b) for b in self.buckets.values())

    def open_ends(self) -> list[int]:
        """The ends of the windows still open (a sliding operator's: its panes')."""
        return list(self.buckets)

    def _tracks_current(self) -> bool:
        """Does its top-N follow the newest open window (tumbling and cumulating windows)?"""
        return type(self) is WindowRuntime

    # -- input -------------------------------------------------------------------------------

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        """Fold one batch; ``wms[i]`` is the watermark record ``i`` arrived under (``trace``, the
        watermark after each record, only matters to merging windows)."""
        admitted = self._admit(keys, recs, ts, wms)
        if admitted is None:
            return
        keys, recs, ts, wms, cols = admitted
        ends, origin = self._assigner.expand(ts)
        if origin is not None:  # several windows per record: one (record, window) pair each
            keys, recs, ts, wms = take_columns(origin, keys, recs, ts, wms)
            cols = [[c[i] for i in origin] for c in cols]
            if not ends:  # every record in a gap between sliding windows
                return
        if min(ends) - 1 > max(wms) or all(e - 1 > w for e, w in zip(ends, wms, strict=True)):
            # nothing late: the common case
            self.plan.fold(self.buckets, self._dirty, keys, ends, *cols, recs)
            return
        on_time: list[int] = []
        late: list[int] = []
        lateness = self._lateness
        for i, (e, w) in enumerate(zip(ends, wms, strict=True)):
            if e - 1 > w:
                on_time.append(i)
            elif not is_late(e, lateness, w):
                self._allowed.append((keys[i], e, recs[i], [c[i] for c in cols], w))
            else:
                late.append(i)
        if late:
            self._late_records(late, origin, keys, recs, ts, wms)
        if on_time:
            keys, ends, recs = take_columns(on_time, keys, ends, recs)
            cols = [[c[i] for i in on_time] for c in cols]
            self.plan.fold(self.buckets, self._dirty, keys, ends, *cols, recs)

    def clock(self, n: int) -> tuple[list[int], list[int]]:
        """Processing time: every record of the batch is at "now", and arrives under the
        watermark just before it, so no record is ever late."""
        now = int(time.time() * 1000)
        return [now] * n, [now - 1] * n

    def processing_watermark(self, watermark: int) -> tuple[int, int, list[int] | None]:
        """The (watermark, data watermark, trace) a processing-time operator advances with: the
        clock, except for the end of input, which still fires everything."""
        now = int(time.time() * 1000) - 1
        return (watermark if watermark == MAX_WATERMARK else now), now, None

    def _late_records(
        self,
        late: list[int],
        origin: list[int] | None,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
    ) -> None:
        """A record is late only when every window it belongs to is (Flink's rule); it then goes
        to the late output once."""
        if origin is None:
            taken: set[int] = set()
        else:
            late_set = set(late)
            taken = {origin[i] for i in range(len(origin)) if i not in late_set}
        reported: set[int] = set()
        for i in late:
            record = i if origin is None else origin[i]
            if record in taken or record in reported:
                continue
            reported.add(record)
            self._late.add(self.op.name, keys[i], ts[i], wms[i], recs[i])

    def _admit(
        self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]
    ) -> tuple[list[str], list[Any], list[int], list[int], list[list[Any]]] | None:
        """The start every window runtime shares: a record whose aggregated fields cannot be
        folded goes to the late output if it is late (the late decision comes first, as in
        Flink), else to the dead letters; processing time replaces the records' times. Returns
        the columns to go on with (``None``: nothing left)."""
        if not keys:
            return None
        cols = self.plan.columns(recs)
        if cols is None:
            keep: list[int] = []
            for i, r in enumerate(recs):
                why = self.plan.bad_field(r)
                if why is None:
                    keep.append(i)
                elif not self.processing_time and self._record_late(ts[i], wms[i]):
                    self._late.add(self.op.name, keys[i], ts[i], wms[i], r)
                else:
                    self._dead.add(f"aggregate:{self.op.name}", *why, r)
            keys, recs, ts, wms = take_columns(keep, keys, recs, ts, wms)
            cols = self.plan.columns(recs)
            if not keys or cols is None:
                return None
        self.records_in += len(keys)
        if self.processing_time:
            ts, wms = self.clock(len(keys))
        return keys, recs, ts, wms, cols

    def _record_late(self, t: int, wm: int) -> bool:
        """Would a record at ``t`` be late under ``wm``: every window holding it past its
        allowed lateness (a record in no window is not late)?"""
        ends, _ = self._assigner.expand([t])
        lateness = self._lateness
        return bool(ends) and all(is_late(e, lateness, wm) for e in ends)

    def _move_time(
        self, watermark: int, data_watermark: int, trace: list[int] | None
    ) -> list[int] | None:
        """Advance the operator's watermarks (never backwards); returns the trace to fire by."""
        if self.processing_time:
            watermark, data_watermark, trace = self.processing_watermark(watermark)
        if data_watermark > self.data_watermark:
            self.data_watermark = data_watermark
        if watermark > self.watermark:
            self.watermark = watermark
        return trace

    # -- time ----------------------------------------------------------------------------------

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        """Move the operator's watermark: fire due windows, apply late updates, finalize.

        ``trace`` is the watermark after each record of the batch (non-decreasing, ending at
        ``watermark``): a window fires at the first of those that reaches its end, and whether
        that first emission is already final depends on that value, not on the batch's last.
        """
        trace = self._move_time(watermark, data_watermark, trace)
        wm = self.watermark
        self._run_timers(sorted(e for e in self.buckets if e - 1 <= wm), trace, wm)

    def _run_timers(self, due: list[int], trace: list[int] | None, wm: int) -> None:
        """Fire the ``due`` windows, apply the batch's late-but-allowed records and finalize
        the windows past their lateness, in the order Flink's timer service and record order
        give (``timer_order``): when the watermark jumps past a fired window's lateness and a
        later window's end together, the earlier window's final emission comes first, and a
        record updates its fired window after the timers its watermark had passed, before
        the later ones. ``wm``: the watermark they run to."""
        allowed, self._allowed = self._allowed, []
        updates = [(end, arrived) for _, end, _, _, arrived in allowed]
        for kind, item, at in timer_order(
            due, self.awaiting_final, updates, self._lateness, trace, wm
        ):
            if kind == FIRE:
                assert at is not None
                self._fire_due(item, at)
            elif kind == FINAL:
                self._finalize_end(item)
            else:
                self._apply_allowed(*allowed[item][:4])

    def _fire_due(self, end: int, wm: int) -> None:
        self._fire(end, self.buckets.pop(end), wm)

    def _start_of(self, end: int) -> int:
        return self._assigner.start_of(end)

    def _fire(self, end: int, bucket: dict[str, list[Any]], wm: int) -> None:
        start = self._assigner.start_of(end)
        final = is_late(end, self._lateness, wm)
        self._results_of(start, end, bucket, final)
        # keys not dirty: RocksDB already holds their value
        self._materialise(end, bucket, self._dirty.pop(end, set()))
        if not final:
            self.awaiting_final[end] = bucket

    def _results_of(self, start: int, end: int, bucket: dict[str, list[Any]], final: bool) -> None:
        """The fired window's results (when ``emits``), counted, and its top-N ranked."""
        self.results_out += len(bucket)
        if not self.emits:
            self.tops.fired_slots(start, end, bucket)
            return
        result = self.plan.result
        results = [result(k, start, end, s, final) for k, s in bucket.items()]
        self.results.extend(results)
        self.tops.fired(start, end, results)

    def top_status(self) -> TopStatus | None:
        if time.monotonic() - self._ranked_at >= RANK_INTERVAL_S:
            self._rank()
        return self.tops.status(self.buckets)

    def _rank(self) -> None:
        """The top-N of the newest window learns of the keys written since it last did: when
        its status is read (at most every ``RANK_INTERVAL_S``), not at every flush, where
        ranking cost more than the write. A key changed in several flushes is offered once."""
        self._ranked_at = time.monotonic()
        if not self._unranked:
            return
        dirty: dict[int, set[str]] = {}
        for flushed in self._unranked:
            for end, keys in flushed.items():
                dirty.setdefault(end, set()).update(keys)
        self._unranked = []
        self.tops.flushed(self.buckets, dirty)

    def _apply_allowed(self, key: str, end: int, rec: Any, vals: list[Any]) -> None:
        """A late-but-allowed record updates its (fired) window, which is emitted again. The
        window is in ``awaiting_final``, or new."""
        bucket = self.awaiting_final.setdefault(end, {})
        is_new = key not in bucket
        self.plan.fold({end: bucket}, {}, [key], [end], *[[v] for v in vals], [rec])
        slots = bucket[key]
        self._put(key, end, slots)
        if is_new:
            self._add_timers(end, [key])
        self._emit(key, self._assigner.start_of(end), end, slots, False)

    def _finalize_end(self, end: int) -> None:
        start = self._assigner.start_of(end)
        for k, slots in self.awaiting_final.pop(end, {}).items():
            self._emit(k, start, end, slots, True)

    def _emit(self, key: str, start: int, end: int, slots: list[Any], final: bool) -> None:
        if self.emits:
            self.results.append(self.plan.result(key, start, end, slots, final))
        self.results_out += 1

    def drain(self) -> list[dict[str, Any]]:
        out, self.results = self.results, []
        return out

    def drain_side(self) -> dict[str, list[Any]]:
        return {}  # windows have no side outputs of their own (late records: LateRecords)

    # -- state ---------------------------------------------------------------------------------

    def _put(self, key: str, end: int, slots: list[Any]) -> None:
        """An allowed-late update: written (copied) with the next generation."""
        self._late_rows.setdefault(end, {})[key] = slots

    def _copy(self, keys: list[str], bucket: dict[str, list[Any]]) -> list[Any]:
        """``keys``' slots end to end, sharing nothing the fold may change later: numbers
        copied; a user-defined accumulator (it may change in place) through msgpack, as it
        will be stored (one call for all of them)."""
        flat = flat_copy(keys, bucket)
        if self._numbers:
            return flat
        copied: list[Any] = slotpack.unpackb(slotpack.packer().pack(flat))
        return copied

    def _materialise(self, end: int, bucket: dict[str, list[Any]], dirty: set[str] | None) -> None:
        """Write a fired window: the slots of ``dirty`` keys (every key when None), copied for
        the next generation, and the cleanup timers of all."""
        keys = list(bucket)
        prefixes = self._prefixes.many(keys)
        chosen = (
            keys
            if dirty is None or dirty.issuperset(keys)
            else list(compress(keys, map(dirty.__contains__, keys)))
        )
        if chosen:
            self._fired.append((self._sid, end, chosen, self._copy(chosen, bucket)))
        by_group: dict[int, list[str]] = {}
        for k, (kg, _) in zip(keys, prefixes, strict=True):
            by_group.setdefault(kg, []).append(k)
        self._write_timers(end, by_group)

    def _add_timers(self, end: int, keys: list[str]) -> None:
        """Cleanup timers for fired windows: one entry per key group, listing its keys."""
        by_group: dict[int, list[str]] = {}
        prefix = self._prefix
        for k in keys:
            by_group.setdefault(prefix(k)[0], []).append(k)
        self._write_timers(end, by_group)

    def _write_timers(self, end: int, by_group: dict[int, list[str]]) -> None:
        seq = self._next_timer_seq()
        for kg, group in by_group.items():
            self._writes[layout.timer_key(kg, self._tsid, end, seq)] = encode_keys(group)
        self._timer_ends.add(end)

    def _write_bucket_timers(self, end: int, crcs: np.ndarray) -> None:
        """Cleanup timers of window ``end`` from its keys' CRC-32s: per key group, how many
        keys and which cell buckets hold them (``codec.encode_bucket_timer``), no key listed
        (a purge deletes those cells of the window whole)."""
        if not len(crcs):
            return
        seq = self._next_timer_seq()
        # one count per (key group, bucket): a single pass over the CRCs (a 2-D gather and a
        # second count cost ~3x as much on a window of 100k keys)
        cell = (crcs % np.uint32(self._max_par)) * np.uint32(cells.BUCKETS)
        cell |= cells.buckets_of_hashes(crcs)
        keys = np.bincount(cell, minlength=self._max_par * cells.BUCKETS)
        keys = keys.reshape(self._max_par, cells.BUCKETS)
        counts = keys.sum(axis=1)
        for g in np.flatnonzero(counts).tolist():
            raw = encode_bucket_timer(int(counts[g]), keys[g] > 0)
            self._writes[layout.timer_key(g, self._tsid, end, seq)] = raw
        self._timer_ends.add(end)

    def _next_timer_seq(self) -> int:
        # nanoseconds keep entries apart across restarts; +1 keeps two flushes in the same
        # nanosecond from overwriting each other's cleanup timers
        self._timer_seq = max(time.time_ns(), self._timer_seq + 1)
        return self._timer_seq

    def flush(self) -> None:
        """Write dirty open windows, fired windows and new cleanup timers in one batch."""
        self._delta().write(self._state)

    def snapshot(self, barrier: bool = True) -> StateDelta:
        """What RocksDB lacks, frozen for the worker's state writer to write while the fold
        goes on: the dirty slots copied (the fold changes them in place), the rest encoded
        already. Not at a barrier, the new keys' state-key prefixes are made now, in one batch
        (the writer would make them one at a time); at a barrier nothing is added to the
        checkpoint's synchronous part."""
        return self._delta(warm=not barrier)

    def _delta(self, warm: bool = True) -> StateDelta:
        """One generation of writes, and a fresh one begins. Slots of built-in aggregates are
        copied as numbers; a user-defined accumulator may change in place: encoded now."""
        if self.tops.current is not None:
            self._unranked.append(self._dirty)
            if len(self._unranked) > MAX_UNRANKED:  # nobody reads the status: bound the memory
                self._rank()
        frozen = self._freeze_dirty(self._sid) + self._take_fired()
        puts, self._writes = self._writes, {}
        part = CellPart(self._cells, self._sid, self.plan.width, frozen, final=self._final())
        return StateDelta(puts, [], [], self._prefix, cells=part)

    def _final(self) -> tuple[int, int]:
        """(state id, the last window end that can no longer change)."""
        return self._sid, self.watermark - self._lateness

    def _take_fired(self) -> list[Frozen]:
        """Fired windows and allowed-late updates since the last generation, copied."""
        frozen, self._fired = self._fired, []
        for end, rows in self._late_rows.items():
            keys = list(rows)
            frozen.append((self._sid, end, keys, self._copy(keys, rows)))
        self._late_rows = {}
        return frozen

    def _freeze_dirty(self, sid: int) -> list[Frozen]:
        """The dirty entries of ``buckets`` (windows, or a sliding operator's panes, stored
        under ``sid``), copied: slots of built-in aggregates as numbers, a user-defined
        accumulator (it may change in place) as a copy of its own; ``_dirty`` starts afresh."""
        frozen: list[Frozen] = []
        for e, keys in self._dirty.items():
            bucket = self.buckets.get(e)
            if bucket is None:
                continue
            present = list(filter(bucket.__contains__, keys))
            frozen.append((sid, e, present, self._copy(present, bucket)))
        self._dirty = {}
        return frozen

    # -- restore -------------------------------------------------------------------------------

    def restore(self, watermark: int, data_watermark: int) -> None:
        """Rebuild what memory holds from restored RocksDB state, as of the checkpoint's
        watermarks: windows still open go back to ``buckets``, fired ones within allowed
        lateness to ``awaiting_final``; the cleanup timers' window ends are listed again."""
        self.watermark, self.data_watermark = watermark, data_watermark
        self._restore_windows(watermark)
        self.reload_timers()

    def migrate(self) -> int:
        """State format 1 to 2: this operator's window rows (and panes) become cells. Returns
        the rows moved."""
        sids = [self._sid]
        if uses_panes(self.op.assigner):
            sids.append(self.op.pane_state_id)
        return sum(migrate_rows(self._state, self._range, sid) for sid in sids)

    def _restore_windows(self, wm: int) -> None:
        for key, end, slots in self.stored_windows(self._sid, seed=True):
            if end - 1 > wm:
                self.buckets.setdefault(end, {})[key] = slots
            elif not is_late(end, self._lateness, wm):
                self.awaiting_final.setdefault(end, {})[key] = slots

    def reload_timers(self) -> None:
        """List the cleanup timers' window ends again from RocksDB (after a restore, or after
        a backfill's files were ingested)."""
        for kg in self._range:
            prefix = layout.state_prefix(kg, self._tsid)
            for tkey, _ in self._state.scan(prefix, layout.prefix_upper_bound(prefix)):
                self._timer_ends.add(layout.decode_timer_key(tkey)[2])

    def stored_windows(self, sid: int, seed: bool = False) -> Iterator[tuple[str, int, list[Any]]]:
        """Every ``(key, window end, slots)`` of the cells of state ``sid`` in this runtime's
        key groups (the newest row of each key in each window); ``seed``: each entry is
        counted (a restore: the log starts empty)."""
        for kg in self._range:
            for ranges in cells.group_ranges(kg, sid):  # a coarse cell and its buckets at a time
                entries = [e for lo, hi in ranges for e in self._state.scan(lo, hi)]
                if seed:
                    for ckey, _ in entries:
                        self._cells.seed(ckey)
                for end, rows in cells.windows_of(entries):
                    for key, slots in rows:
                        yield key.decode(), end, slots

    def stored_window_in(self, sid: int, min_end: int, max_end: int) -> tuple[str, int] | None:
        """A ``(key, end)`` of a stored window of ``sid`` ending in ``[min_end, max_end]``."""
        return stored_window_in(self._state, self._range, sid, min_end, max_end)

    def stored_rows(self, sid: int) -> Iterator[tuple[str, int, bytes]]:
        """Every ``(key, namespace, value)`` of state ``sid`` in this runtime's key groups."""
        for kg in self._range:
            prefix = layout.state_prefix(kg, sid)
            for skey, raw in self._state.scan(prefix, layout.prefix_upper_bound(prefix)):
                _, _, key, ns = layout.decode_state_key(skey)
                yield key.decode(), ns, raw

    def _purged(self, kg: int, end: int, keys: list[str]) -> list[bytes]:
        """What to delete of window ``end`` of ``keys`` (of key group ``kg``): their cells."""
        return cell_entries(self._state, self._sid, end, keys, self._max_par)

    def purge(self, force: bool = False) -> int:
        """Delete windows whose query retention has passed (counted from the data watermark).

        Returns the number of windows deleted."""
        if self.data_watermark == MIN_WATERMARK or not self._timer_ends:
            return 0
        now = time.monotonic()
        if not force and now - self._last_purge < self._purge_interval:
            return 0
        self._last_purge = now
        cutoff = self.data_watermark - self._lateness - self._retention + 1  # purge end <= cutoff
        due = sorted(e for e in self._timer_ends if e <= cutoff)
        if not due:
            return 0
        self.flush()
        deletes: list[bytes] = []
        windows = 0
        lo_ns = layout.encode_namespace(due[0])
        for kg in self._range:
            tprefix = layout.state_prefix(kg, self._tsid)
            hi = layout.namespace_upper_bound(tprefix, due[-1])
            for tkey, raw in self._state.scan(tprefix + lo_ns, hi):
                deletes.append(tkey)
                end = layout.decode_timer_key(tkey)[2]
                if raw[:1] == BUCKET_TIMER:
                    count, buckets = decode_bucket_timer(raw)
                    held = [(kg, b) for b in buckets]
                    deletes.extend(bucket_entries(self._state, self._sid, end, held))
                    windows += count
                    continue
                keys = decode_keys(raw)
                deletes.extend(self._purged(kg, end, keys))
                windows += len(keys)
        self._timer_ends.difference_update(due)
        if deletes:
            self._state.write({}, deletes)
        return windows


def timer_order(
    due: list[int],
    awaiting: Iterable[int],
    updates: list[tuple[int, int]],
    lateness: int,
    trace: list[int] | None,
    wm: int,
) -> list[tuple[int, int, int | None]]:
    """What watermark ``wm`` does, in order: ``(FIRE, end, watermark it fires at)`` for the
    ``due`` windows, ``(FINAL, end, None)`` for the windows it takes past their lateness, and
    ``(UPDATE, i, None)`` for ``updates[i]``, a late-but-allowed record ``(window end, the
    watermark it arrived under)``. Timers by time (a window fires at ``end - 1``, is final at
    ``end - 1 + lateness``; ties by window end, a firing first), and a record after the timers
    its watermark had passed, before the later ones, in arrival order. Finalized: the
    ``awaiting`` windows, the updated ones and the due ones that fire before it, once ``wm``
    passes their lateness.

    Example:
        >>> timer_order([100], [50], [(50, 60)], 30, None, 10**6)
        [(2, 0, None), (1, 50, None), (0, 100, 1000000)]
    """
    events: list[tuple[int, tuple[int, int, int], int | None]] = []
    finals: set[int] = set()
    for end in due:
        at = fired_at(trace, end, wm)
        events.append((end - 1, (0, end, FIRE), at))
        if not is_late(end, lateness, at) and is_late(end, lateness, wm):
            finals.add(end)
    finals.update(end for end in awaiting if is_late(end, lateness, wm))
    finals.update(end for end, _ in updates if is_late(end, lateness, wm))
    events.extend((end - 1 + lateness, (0, end, FINAL), None) for end in finals)
    events.extend((arrived, (1, i, UPDATE), None) for i, (_, arrived) in enumerate(updates))
    events.sort(key=lambda e: (e[0], e[1]))
    return [(kind, item, at) for _, (_, item, kind), at in events]


def fired_at(trace: list[int] | None, end: int, wm: int) -> int:
    """The watermark at which window ``end`` fired: the first of the batch's per-record
    watermarks (``trace``) that reaches its end, up to ``wm``, else ``wm``."""
    if trace:
        i = bisect_left(trace, end - 1)
        if i < len(trace) and trace[i] <= wm:
            return trace[i]
    return wm
