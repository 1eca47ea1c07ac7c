"""Keyed process functions (Flink's KeyedProcessFunction): per-record user code with keyed value,
list and map state and event- and processing-time timers.

State lives in RocksDB under the key-group layout: ``key group | operator state id | key |
namespace``, the namespace a stable hash of the state's name, the value ``[name, kind, data]``
(msgpack). A key's states are one prefix scan, which is what the query API answers with. States
touched by a batch are cached and written back at each flush.

Side outputs: ``ctx.output(tag, record)`` writes to a tag the job declared
(``result.side_output(tag)``); an undeclared tag, or a record JSON cannot hold exactly, goes to
the dead letters with the reason, never to the sink.

Timers: a timer's time is any signed 64-bit integer; an event-time timer fires once the
watermark reaches it, *before* the first record that
arrives under that watermark, so batching never changes what a function sees. Processing-time
timers fire when the wall clock passes them (the worker ticks every 10 ms). Timers are kept in
RocksDB too, one entry per key group, time and kind, listing the keys.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

import orjson

from weir.engine.nodes import OutputTag, ProcessNode
from weir.engine.runtime.messages import TopStatus
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import (
    decode_keys,
    decode_state,
    encode_keys,
    encode_state,
    state_namespace,
)
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.windows import MAX_TIME, MIN_TIME
from weir.state import layout
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange, key_group

EVENT, PROCESSING = 0, 1


class _State:
    def __init__(self, cell: list[Any]) -> None:
        self._cell = cell  # [name, kind, data, dirty]

    def _set(self, data: Any) -> None:
        self._cell[2] = data
        self._cell[3] = True

    def clear(self) -> None:
        self._set(None)


class ValueState(_State):
    def get(self, default: Any = None) -> Any:
        return default if self._cell[2] is None else self._cell[2]

    def set(self, value: Any) -> None:
        self._set(value)


class ListState(_State):
    def get(self) -> list[Any]:
        return list(self._cell[2] or [])

    def append(self, value: Any) -> None:
        self._set([*(self._cell[2] or []), value])


class MapState(_State):
    def get(self, key: Any, default: Any = None) -> Any:
        return (self._cell[2] or {}).get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self._set({**(self._cell[2] or {}), key: value})

    def remove(self, key: Any) -> None:
        data = dict(self._cell[2] or {})
        data.pop(key, None)
        self._set(data or None)

    def items(self) -> list[tuple[Any, Any]]:
        return list((self._cell[2] or {}).items())


class Context:
    """What a process function sees for the current record (or timer)."""

    def __init__(self, runtime: ProcessRuntime) -> None:
        self._rt = runtime
        self.key = ""
        self.timestamp: int | None = None
        self.watermark = MIN_WATERMARK

    @property
    def retention_ms(self) -> int:
        """How long a fired result stays queryable (``--state-retention-ms``, event time)."""
        return self._rt.retention_ms

    @property
    def processing_time(self) -> int:
        return int(time.time() * 1000)

    def value(self, name: str) -> ValueState:
        return ValueState(self._rt.cell(self.key, name, "value"))

    def list(self, name: str) -> ListState:
        return ListState(self._rt.cell(self.key, name, "list"))

    def map(self, name: str) -> MapState:
        return MapState(self._rt.cell(self.key, name, "map"))

    def register_event_time_timer(self, timestamp: int) -> None:
        self._rt.add_timer(EVENT, _timer_time(timestamp), self.key)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._rt.add_timer(PROCESSING, _timer_time(timestamp), self.key)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._rt.delete_timer(EVENT, _timer_time(timestamp), self.key)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._rt.delete_timer(PROCESSING, _timer_time(timestamp), self.key)

    def emit(self, record: Any) -> None:
        self._rt.results.append(record)
        self._rt.results_out += 1

    def output(self, tag: OutputTag, record: Any) -> None:
        """Write ``record`` to the side output ``tag`` (Flink's ``ctx.output``)."""
        self._rt.side_output(tag, record)

    def add_to_metric(self, name: str, delta: int) -> None:
        """Add ``delta`` to the operator's figure ``name``, which the worker reports with its
        status (a library's function, such as a pattern's, keeps its counts here; a function
        with ``metrics_from_state`` rebuilds its gauges from state on restore)."""
        metrics = self._rt.metrics
        metrics[name] = metrics.get(name, 0) + delta


def _timer_time(timestamp: Any) -> int:
    """A timer's time as an int of the signed 64-bit range (it is stored in a state key); the
    ValueError sends the record (or timer) being processed to the dead letters."""
    t = int(timestamp)
    if not MIN_TIME <= t <= MAX_TIME:
        raise ValueError(
            f"timer time {t} is outside the signed 64-bit range [{MIN_TIME}, {MAX_TIME}]"
        )
    return t


class ProcessRuntime:
    processing_time = True  # ticks on the clock: processing-time timers

    def __init__(
        self,
        op: ProcessNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
    ) -> None:
        self.op = op
        fn = op.function
        self._process = fn.process if hasattr(fn, "process") else fn
        self._on_timer = getattr(fn, "on_timer", None)
        self._state = state
        self._range = key_groups
        self._max_par = max_parallelism
        self._dead = dead
        self.retention_ms = retention_ms
        self._sid = op.state_id
        self._tsid = op.timer_state_id
        self._cells: dict[tuple[str, str], list[Any]] = {}
        self._timers: tuple[dict[int, set[str]], dict[int, set[str]]] = ({}, {})
        self._heaps: tuple[list[int], list[int]] = ([], [])
        self._dirty_timers: set[tuple[int, int, int]] = set()  # (kind, time, key group)
        self._ctx = Context(self)
        self.results: list[Any] = []
        self._side: dict[str, list[Any]] = {tag: [] for tag in op.side_outputs}
        self.watermark = MIN_WATERMARK
        self.data_watermark = MIN_WATERMARK
        self.records_in = 0
        self.results_out = 0
        self.open_windows = 0
        self.metrics: dict[str, int] = {}

    # -- state -----------------------------------------------------------------------------------

    def _skey(self, key: str, name: str) -> bytes:
        kg = key_group(key, self._max_par)
        return layout.state_key(kg, self._sid, key.encode(), state_namespace(name))

    def cell(self, key: str, name: str, kind: str) -> list[Any]:
        found = self._cells.get((key, name))
        if found is None:
            raw = self._state.get(self._skey(key, name))
            data = None if raw is None else decode_state(raw)[2]
            found = self._cells[(key, name)] = [name, kind, data, False]
        elif found[1] != kind:
            raise TypeError(f"state {name!r} is a {found[1]} state, not a {kind} state")
        return found

    def add_timer(self, kind: int, at: int, key: str) -> None:
        keys = self._timers[kind].setdefault(at, set())
        if not keys:
            heapq.heappush(self._heaps[kind], at)
        if key not in keys:
            keys.add(key)
            self._dirty_timers.add((kind, at, key_group(key, self._max_par)))

    def delete_timer(self, kind: int, at: int, key: str) -> None:
        keys = self._timers[kind].get(at)
        if keys and key in keys:
            keys.discard(key)
            self._dirty_timers.add((kind, at, key_group(key, self._max_par)))

    # -- input and time --------------------------------------------------------------------------

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        self._run(self._process, keys, recs, ts, wms)

    def _run(
        self,
        process: Any,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
    ) -> None:
        ctx = self._ctx
        event_heap = self._heaps[EVENT]
        for key, rec, t, w in zip(keys, recs, ts, wms, strict=True):
            if event_heap and event_heap[0] <= w:
                self._fire(EVENT, w)
            self.records_in += 1
            ctx.key, ctx.timestamp, ctx.watermark = key, t, w
            try:
                process(rec, ctx)
            except Exception as exc:  # noqa: BLE001 - a bad record never stops the job
                why = f"{type(exc).__name__}: {exc}"
                self._dead.add(f"process:{self.op.name}", type(exc).__name__, why, rec)

    def _fire(self, kind: int, upto: int) -> None:
        heap = self._heaps[kind]
        ctx = self._ctx
        while heap and heap[0] <= upto:
            at = heapq.heappop(heap)
            keys = self._timers[kind].pop(at, set())
            for key in sorted(keys):
                self._dirty_timers.add((kind, at, key_group(key, self._max_par)))
                if self._on_timer is None:
                    continue
                ctx.key, ctx.timestamp = key, at
                ctx.watermark = self.watermark if kind == PROCESSING else upto
                try:
                    self._on_timer(at, ctx)
                except Exception as exc:  # noqa: BLE001
                    self._dead.add(
                        f"timer:{self.op.name}",
                        type(exc).__name__,
                        f"{type(exc).__name__}: {exc}",
                        {"key": key, "timer": at},
                    )

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        if data_watermark > self.data_watermark:
            self.data_watermark = data_watermark
        if watermark > self.watermark:
            self.watermark = watermark
        self._fire(EVENT, self.watermark)
        now = MAX_WATERMARK if watermark == MAX_WATERMARK else int(time.time() * 1000)
        self._fire(PROCESSING, now)

    def drain(self) -> list[Any]:
        out, self.results = self.results, []
        return out

    def side_output(self, tag: OutputTag, record: Any) -> None:
        name = tag.name if isinstance(tag, OutputTag) else None
        pending = self._side.get(name) if name is not None else None
        if pending is None:
            declared = ", ".join(sorted(self._side)) or "none"
            self._dead.add(
                f"side_output:{self.op.name}",
                "undeclared-tag",
                f"ctx.output({tag!r}): not a side output of {self.op.name!r} (declared: "
                f"{declared}); declare it with result.side_output(OutputTag(...))",
                record,
            )
            return
        try:
            orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS)
        except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
            self._dead.add(
                f"side_output:{self.op.name}",
                "not-json",
                f"side output {name!r} cannot hold the record as JSON: {exc}",
                repr(record),  # as text: the dead letters' own JSON could not hold it either
            )
            return
        pending.append(record)

    def drain_side(self) -> dict[str, list[Any]]:
        """The side outputs' records since the last drain, by tag (only tags that got some)."""
        out = {tag: recs for tag, recs in self._side.items() if recs}
        for tag in out:
            self._side[tag] = []
        return out

    # -- persistence -----------------------------------------------------------------------------

    def flush(self) -> None:
        self.snapshot().write(self._state)
        if len(self._cells) > 100_000:  # bound the cache: every cell is persisted by now
            self._cells.clear()

    def snapshot(self, barrier: bool = True) -> StateDelta:
        """Changed states and timers, encoded (a user's value may be changed in place later);
        a fresh generation begins. The cache keeps every cell until ``flush`` writes what is
        left and bounds it (the worker purges only when no generation waits to be written),
        so a read never reaches a RocksDB older than a generation not yet written."""
        puts: dict[bytes, bytes] = {}
        deletes: list[bytes] = []
        for (key, name), cell in self._cells.items():
            if cell[3]:
                skey = self._skey(key, name)
                if cell[2] is None:
                    deletes.append(skey)
                else:
                    puts[skey] = encode_state(name, cell[1], cell[2])
                cell[3] = False
        for (kind, at), kgs in self._dirty_timer_groups().items():
            for kg, keys in kgs.items():
                tkey = layout.timer_key(kg, self._tsid, at, kind)
                if keys:
                    puts[tkey] = encode_keys(sorted(keys))
                else:
                    deletes.append(tkey)
        self._dirty_timers.clear()
        return StateDelta(puts, [], deletes)

    def _dirty_timer_groups(self) -> dict[tuple[int, int], dict[int, list[str]]]:
        """The keys of each dirty timer entry, by (kind, time) and key group: each time's keys
        are grouped once, however many of its key groups changed (many keys share a time)."""
        out: dict[tuple[int, int], dict[int, list[str]]] = {}
        for kind, at, kg in self._dirty_timers:
            out.setdefault((kind, at), {})[kg] = []
        for (kind, at), kgs in out.items():
            for k in self._timers[kind].get(at, ()):
                mine = kgs.get(key_group(k, self._max_par))
                if mine is not None:
                    mine.append(k)
        return out

    def restore(self, watermark: int, data_watermark: int) -> None:
        """Timers come back from RocksDB (keyed state is read from it on first use anyway), and
        the gauges a function derives from its keys' state (``metrics_from_state``)."""
        self.watermark, self.data_watermark = watermark, data_watermark
        for kg in self._range:
            prefix = layout.state_prefix(kg, self._tsid)
            for tkey, raw in self._state.scan(prefix, layout.prefix_upper_bound(prefix)):
                _, _, at, kind = layout.decode_timer_key(tkey)
                keys = self._timers[kind].setdefault(at, set())
                if not keys:
                    heapq.heappush(self._heaps[kind], at)
                keys.update(decode_keys(raw))
        rebuild = getattr(self.op.function, "metrics_from_state", None)
        if rebuild is not None:  # gauges a function keeps in its keys' state
            self.metrics.update(rebuild(self._state_values))

    def _state_values(self, name: str) -> list[Any]:
        """What state ``name`` holds for each key of this worker's key groups."""
        return [self.cell(key, name, kind)[2] for key, kind in self.keys_holding(name)]

    def purge(self, force: bool = False) -> int:
        """A process function manages its own state (clear() it, or use timers); only the
        cache is bounded here."""
        if len(self._cells) > 100_000:
            self.flush()
        return 0

    def top_status(self) -> TopStatus | None:
        return None  # keys share no windows to rank

    def keys_holding(self, name: str) -> list[tuple[str, str]]:
        """``(key, kind)`` of every key of this worker's key groups whose state ``name`` holds
        something, in key order: RocksDB's, overridden by the cache (which holds whatever
        RocksDB lacks yet). For a broadcast function's ``apply_to_keyed_state``."""
        space = state_namespace(name)
        found: dict[str, str] = {}
        for kg in self._range:
            prefix = layout.state_prefix(kg, self._sid)
            for skey, raw in self._state.scan(prefix, layout.prefix_upper_bound(prefix)):
                _, _, raw_key, ns = layout.decode_state_key(skey)
                stored, kind, _ = decode_state(raw) if ns == space else ("", "", None)
                if stored == name:
                    found[raw_key.decode()] = kind
        for (key, cname), cell in self._cells.items():
            if cname == name:
                if cell[2] is None:
                    found.pop(key, None)
                else:
                    found[key] = cell[1]
        return sorted(found.items())
