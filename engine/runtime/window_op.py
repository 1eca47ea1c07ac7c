"""The keyed window operator: pre-aggregates batches, fires on watermarks, keeps state in RocksDB.

Configuration: the operator definition, its key-group range, retention.
Transient: ``cache`` holds the accumulators of *open* windows (like Flink's heap timers), so a batch
is folded without RocksDB reads; dirty entries reach RocksDB every flush (``flush``), where the API
reads them. Checkpointed: RocksDB itself (window state and cleanup timers).

Lateness is judged per record against the watermark it arrived under (``wms``), never against the
batch's end, so batching changes no result: on-time records are folded; records for a window that
has fired but is within allowed lateness update it one by one, in arrival order, each emitting an
update; records later than that go to the late output untouched.
"""

from __future__ import annotations

import time
from typing import Any

import msgpack

from engine.job import WindowOperator
from engine.runtime.fold import FoldPlan
from engine.runtime.outputs import DeadLetters, LateRecords
from engine.watermarks import MIN_WATERMARK
from state import layout
from state.keygroups import KeyGroupRange, key_group
from state.rocksdb import RocksState

_NUMBER_TYPES = frozenset({int, float})
WindowKey = tuple[str, int]


def encode_window(start: int, slots: list[Any]) -> bytes:
    return msgpack.packb([start, *slots])  # type: ignore[no-any-return]


def decode_window(raw: bytes) -> tuple[int, list[Any]]:
    values = msgpack.unpackb(raw)
    return int(values[0]), list(values[1:])


class WindowRuntime:
    def __init__(
        self,
        op: WindowOperator,
        state: RocksState,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
        purge_interval_s: float = 1.0,
    ) -> None:
        self.op = op
        self.plan = FoldPlan(op.aggregates)
        self._assigner = op.assigner
        self._lateness = op.allowed_lateness_ms
        self._state = state
        self._range = key_groups
        self._max_par = max_parallelism
        self._late = late
        self._dead = dead
        self._retention = retention_ms
        self._purge_interval = purge_interval_s
        self._sid = op.state_id
        self._tsid = op.timer_state_id
        # transient
        self.cache: dict[WindowKey, list[Any]] = {}
        self._pending: dict[int, list[str]] = {}
        self._created: list[WindowKey] = []
        self._dirty: set[WindowKey] = set()
        self._writes: dict[bytes, bytes] = {}
        self._allowed: list[tuple[str, int, int, Any, list[Any]]] = []
        self._awaiting_final: dict[int, dict[str, None]] = {}
        self._last_purge = 0.0
        self._purged_below = MIN_WATERMARK
        self.results: list[dict[str, Any]] = []
        # progress
        self.watermark = MIN_WATERMARK
        self.data_watermark = MIN_WATERMARK
        self.records_in = 0
        self.results_out = 0

    # -- input -------------------------------------------------------------------------------

    def process(self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]) -> None:
        """Fold one batch; ``wms[i]`` is the watermark record ``i`` arrived under."""
        if not keys:
            return
        cols, keep = self._columns(recs)
        if keep is not None:
            keys, recs, ts, wms = _take(keep, keys, recs, ts, wms)
            if not keys:
                return
            cols, _ = self._columns(recs)
        self.records_in += len(keys)
        ends = self._assigner.window_ends(ts)
        if min(ends) - 1 > max(wms):  # nothing late: the common case
            self._fold(keys, ends, cols, recs)
            return
        on_time: list[int] = []
        lateness = self._lateness
        for i, (e, w) in enumerate(zip(ends, wms, strict=True)):
            if e - 1 > w:
                on_time.append(i)
            elif e - 1 + lateness > w:
                self._allowed.append((keys[i], e, w, recs[i], [c[i] for c in cols]))
            else:
                self._late.add(self.op.name, keys[i], ts[i], w, recs[i])
        if on_time:
            sel = [keys[i] for i in on_time], [ends[i] for i in on_time]
            self._fold(
                sel[0], sel[1], [[c[i] for i in on_time] for c in cols], [recs[i] for i in on_time]
            )

    def _fold(
        self, keys: list[str], ends: list[int], cols: list[list[Any]], recs: list[Any]
    ) -> None:
        self.plan.fold(self.cache, self._pending, self._created, keys, ends, *cols, recs)
        self._dirty.update(zip(keys, ends, strict=True))

    def _columns(self, recs: list[Any]) -> tuple[list[list[Any]], list[int] | None]:
        """Field columns for the fold; records with a missing or non-numeric field go to the
        dead-letter output (returns the indices to keep when any was dropped)."""
        cols: list[list[Any]] = []
        try:
            for f in self.plan.fields:
                col = [r[f] for r in recs]
                if not set(map(type, col)) <= _NUMBER_TYPES:
                    raise TypeError
                cols.append(col)
            return cols, None
        except (KeyError, TypeError, IndexError):
            pass
        keep: list[int] = []
        for i, r in enumerate(recs):
            reason = self._bad_field(r)
            if reason is None:
                keep.append(i)
            else:
                self._dead.add(f"aggregate:{self.op.name}", reason, r)
        return [], keep

    def _bad_field(self, rec: Any) -> str | None:
        for f in self.plan.fields:
            try:
                v = rec[f]
            except (KeyError, TypeError, IndexError):
                return f"record has no field {f!r} to aggregate"
            if type(v) not in _NUMBER_TYPES:
                return f"field {f!r} is {type(v).__name__} {v!r}, not a number"
        return None

    # -- time ----------------------------------------------------------------------------------

    def advance(self, watermark: int, data_watermark: int) -> None:
        """Move the operator's watermark: fire due windows, apply late updates, finalize."""
        if data_watermark > self.data_watermark:
            self.data_watermark = data_watermark
        if watermark > self.watermark:
            self.watermark = watermark
        wm = self.watermark
        due = sorted(e for e in self._pending if e - 1 <= wm)
        lateness = self._lateness
        for end in due:
            start = self._assigner.start_of(end)
            keys = self._pending.pop(end)
            final = end - 1 + lateness <= wm
            for k in keys:
                slots = self.cache.pop((k, end))
                self._put(k, end, start, slots)
                self._emit(k, start, end, slots, final)
            if not final:
                self._awaiting_final.setdefault(end, {}).update(dict.fromkeys(keys))
        if self._allowed:
            self._apply_allowed()
        if self._awaiting_final:
            self._finalize(wm)

    def _apply_allowed(self) -> None:
        """Late-but-allowed records, in arrival order: each updates its window and re-emits."""
        fold = self.plan.fold
        for key, end, _w, rec, vals in self._allowed:
            start = self._assigner.start_of(end)
            current = self._read(key, end)
            tmp: dict[WindowKey, list[Any]] = {}
            if current is not None:
                tmp[(key, end)] = current
            created: list[WindowKey] = []
            fold(tmp, {}, created, [key], [end], *[[v] for v in vals], [rec])
            slots = tmp[(key, end)]
            self._put(key, end, start, slots)
            if created:
                self._created.extend(created)
            self._awaiting_final.setdefault(end, {})[key] = None
            self._emit(key, start, end, slots, False)
        self._allowed.clear()

    def _finalize(self, wm: int) -> None:
        for end in sorted(e for e in self._awaiting_final if e - 1 + self._lateness <= wm):
            start = self._assigner.start_of(end)
            for k in self._awaiting_final.pop(end):
                slots = self._read(k, end)
                if slots is not None:
                    self._emit(k, start, end, slots, True)

    # -- state ---------------------------------------------------------------------------------

    def _skey(self, key: str, end: int) -> tuple[int, bytes]:
        kb = key.encode()
        kg = key_group(key, self._max_par)
        return kg, layout.state_key(kg, self._sid, kb, end)

    def _put(self, key: str, end: int, start: int, slots: list[Any]) -> None:
        self._writes[self._skey(key, end)[1]] = encode_window(start, slots)

    def _read(self, key: str, end: int) -> list[Any] | None:
        cached = self.cache.get((key, end))
        if cached is not None:
            return cached
        skey = self._skey(key, end)[1]
        raw = self._writes.get(skey)
        if raw is None:
            raw = self._state.get(skey)
        return None if raw is None else decode_window(raw)[1]

    def _emit(self, key: str, start: int, end: int, slots: list[Any], final: bool) -> None:
        out: dict[str, Any] = {"key": key, "start": start, "end": end}
        out.update(self.plan.results(slots))
        out["final"] = final
        self.results.append(out)
        self.results_out += 1

    def drain(self) -> list[dict[str, Any]]:
        out, self.results = self.results, []
        return out

    def flush(self) -> None:
        """Write dirty open windows, fired windows and new cleanup timers in one batch."""
        writes = self._writes
        start_of = self._assigner.start_of
        cache = self.cache
        sid, tsid, m = self._sid, self._tsid, self._max_par
        for k, e in self._dirty:
            slots = cache.get((k, e))
            if slots is not None:
                kb = k.encode()
                writes[layout.state_key(key_group(k, m), sid, kb, e)] = encode_window(
                    start_of(e), slots
                )
        for k, e in self._created:
            kb = k.encode()
            writes[layout.timer_key(key_group(k, m), tsid, e, kb)] = b""
        self._dirty.clear()
        self._created.clear()
        if writes:
            self._state.write(writes)
            self._writes = {}

    def purge(self, force: bool = False) -> int:
        """Delete windows whose query retention has passed (counted from the data watermark)."""
        if self.data_watermark == MIN_WATERMARK:
            return 0
        now = time.monotonic()
        if not force and now - self._last_purge < self._purge_interval:
            return 0
        self._last_purge = now
        cutoff = self.data_watermark - self._lateness - self._retention + 1  # purge end <= cutoff
        if cutoff <= self._purged_below:
            return 0
        self.flush()
        deletes: list[bytes] = []
        lo_ns = layout.encode_namespace(MIN_WATERMARK)
        hi_ns = layout.encode_namespace(cutoff + 1)
        for kg in self._range:
            prefix = layout.state_prefix(kg, self._tsid)
            for tkey, _ in self._state.scan(prefix + lo_ns, prefix + hi_ns):
                _, _, end, kb = layout.decode_timer_key(tkey)
                deletes.append(tkey)
                deletes.append(layout.state_key(kg, self._sid, kb, end))
        self._purged_below = cutoff
        if deletes:
            self._state.write({}, deletes)
        return len(deletes) // 2


def _take(keep: list[int], *columns: list[Any]) -> tuple[list[Any], ...]:
    return tuple([col[i] for i in keep] for col in columns)
