"""Keyed broadcast process functions (Flink's ``KeyedBroadcastProcessFunction`` and its
``CoBroadcastWithKeyedOperator``): a keyed process function with a second, broadcast input.

- The keyed input's records go to ``process_element(event, ctx)`` as a process function's do
  (``process.py``: keyed state, timers, ``emit``, side outputs), with
  ``ctx.broadcast_state(name)`` read-only; ``on_timer(timestamp, ctx)`` sees the same.
- The broadcast input's records reach every worker and go to
  ``process_broadcast_element(event, ctx)``: ``ctx.broadcast_state(name)`` writable,
  ``ctx.apply_to_keyed_state(name, fn)`` calls ``fn(key, state)`` for every key of this
  worker's key groups holding state ``name``, ``emit`` and side outputs; there is no current
  key, so no keyed state and no timers (``BroadcastStateError``).

Both inputs' records arrive under the operator's watermark, the minimum of its inputs'; due
event-time timers fire before a record of either input that arrives under a watermark that
reaches them, so batching changes nothing a function sees. Broadcast state is stored and
checkpointed as ``broadcast_state.py`` says; keyed state and timers as a process function's.

A (non-keyed) broadcast process function (``BroadcastRuntime``) is the same runtime with a
context that has no keyed state, no timers and no ``apply_to_keyed_state``: its other input's
records carry no key and stay on the worker that read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

from weir.base.errors import BroadcastStateError
from weir.engine.nodes import BroadcastProcessNode, KeyedBroadcastNode, OutputTag
from weir.engine.runtime.operators.broadcast_state import (
    BroadcastState,
    BroadcastStates,
    ReadOnlyBroadcastState,
)
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.process import (
    EVENT,
    Context,
    ListState,
    MapState,
    ProcessRuntime,
    ValueState,
)
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.backend import StateBackend
from weir.state.keygroups import KeyGroupRange

KeyedState = ValueState | ListState | MapState
_KINDS: dict[str, type[KeyedState]] = {"value": ValueState, "list": ListState, "map": MapState}


class _NoKeyedState:
    """Keyed state and timers, each refused with the context's ``_refused`` message (a
    context with no current key)."""

    def _refused(self, call: str) -> NoReturn:
        raise NotImplementedError

    def value(self, name: str) -> NoReturn:
        self._refused(f"ctx.value({name!r})")

    def list(self, name: str) -> NoReturn:
        self._refused(f"ctx.list({name!r})")

    def map(self, name: str) -> NoReturn:
        self._refused(f"ctx.map({name!r})")

    def register_event_time_timer(self, timestamp: int) -> NoReturn:
        self._refused(f"ctx.register_event_time_timer({timestamp!r})")

    def register_processing_time_timer(self, timestamp: int) -> NoReturn:
        self._refused(f"ctx.register_processing_time_timer({timestamp!r})")

    def delete_event_time_timer(self, timestamp: int) -> NoReturn:
        self._refused(f"ctx.delete_event_time_timer({timestamp!r})")

    def delete_processing_time_timer(self, timestamp: int) -> NoReturn:
        self._refused(f"ctx.delete_processing_time_timer({timestamp!r})")


class ReadOnlyContext(Context):
    """What ``process_element`` and ``on_timer`` see: a process function's context, plus the
    broadcast states, read-only (Flink's ``ReadOnlyContext``)."""

    def __init__(self, runtime: ProcessRuntime, states: BroadcastStates) -> None:
        super().__init__(runtime)
        self._states = states

    def broadcast_state(self, name: str) -> ReadOnlyBroadcastState:
        return self._states.read_only(name)


class BroadcastContext(_NoKeyedState):
    """What ``process_broadcast_element`` sees (Flink's ``KeyedBroadcastProcessFunction.
    Context``): the record's timestamp, the operator's watermark, writable broadcast state,
    every key's state through ``apply_to_keyed_state``, ``emit`` and ``output``."""

    key = None  # the broadcast side has no current key

    def __init__(self, runtime: KeyedBroadcastRuntime) -> None:
        self._rt = runtime
        self.timestamp: int | None = None
        self.watermark = MIN_WATERMARK

    @property
    def processing_time(self) -> int:
        return int(time.time() * 1000)

    def broadcast_state(self, name: str) -> BroadcastState:
        return self._rt.broadcast_states.writable(name)

    def apply_to_keyed_state(self, name: str, fn: Callable[[str, KeyedState], Any]) -> None:
        """``fn(key, state)`` for every key of this worker holding keyed state ``name``, in key
        order; ``state`` is its value, list or map state, which ``fn`` may change or clear."""
        if not isinstance(name, str) or not callable(fn):
            raise BroadcastStateError(
                f"apply_to_keyed_state({name!r}, {fn!r}): pass a keyed state's name and a "
                "function fn(key, state)"
            )
        rt = self._rt
        for key, kind in rt.keys_holding(name):
            fn(key, _KINDS[kind](rt.cell(key, name, kind)))

    def emit(self, record: Any) -> None:
        self._rt.results.append(record)
        self._rt.results_out += 1

    def output(self, tag: OutputTag, record: Any) -> None:
        self._rt.side_output(tag, record)

    def _refused(self, call: str) -> NoReturn:
        raise BroadcastStateError(
            f"{call} in process_broadcast_element: the broadcast side has no current key; "
            "reach every key's state with ctx.apply_to_keyed_state(name, fn), or register "
            "timers in process_element"
        )


class KeyedBroadcastRuntime(ProcessRuntime):
    """A process function's runtime with a broadcast input (``process_broadcast``) and the
    operator's broadcast states, loaded from RocksDB when it is built (after a restore, the
    worker's RocksDB already holds its copy)."""

    def __init__(
        self,
        op: KeyedBroadcastNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
    ) -> None:
        super().__init__(op, state, key_groups, max_parallelism, late, dead, retention_ms)
        fn = op.function
        self.broadcast_states = BroadcastStates(op.name, op.state_id, op.state_names, state)
        # the keyed side enters through process_element, with the read-only context
        self._process = fn.process_element
        self._on_broadcast = fn.process_broadcast_element
        self._ctx = ReadOnlyContext(self, self.broadcast_states)
        self._bctx = BroadcastContext(self)

    def process_broadcast(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        """A batch of the broadcast input (``keys``: none, the records are every worker's);
        ``wms[i]``: the watermark record ``i`` arrived under. A record whose function raises
        goes to the dead letters; the changes it made before raising stay (every worker makes
        the same ones)."""
        ctx = self._bctx
        event_heap = self._heaps[EVENT]
        for rec, t, w in zip(recs, ts, wms, strict=True):
            if event_heap and event_heap[0] <= w:
                self._fire(EVENT, w)
            self.records_in += 1
            ctx.timestamp, ctx.watermark = t, w
            try:
                self._on_broadcast(rec, ctx)
            except Exception as exc:  # noqa: BLE001 - a bad record never stops the job
                why = f"{type(exc).__name__}: {exc}"
                self._dead.add(f"broadcast:{self.op.name}", type(exc).__name__, why, rec)

    def snapshot(self, barrier: bool = True) -> StateDelta:
        """The keyed state's and timers' changes and the broadcast states', one generation."""
        delta = super().snapshot(barrier)
        extra = self.broadcast_states.snapshot()
        delta.puts.update(extra.puts)
        delta.deletes.extend(extra.deletes)
        return delta


class NonKeyedContext(_NoKeyedState, ReadOnlyContext):
    """What a (non-keyed) broadcast process function's ``process_element`` sees: the record's
    timestamp, the watermark, the broadcast states read-only, ``emit`` and ``output``; its
    records have no key (``key`` is ``""``), so no keyed state and no timers."""

    def _refused(self, call: str) -> NoReturn:
        raise BroadcastStateError(
            f"{call} in a broadcast process function on a non-keyed stream: its records have "
            "no key, so no keyed state and no timers; key the stream first "
            "(stream.key_by(...).connect(broadcast)) for a keyed broadcast process function"
        )


class BroadcastRuntime(KeyedBroadcastRuntime):
    """A (non-keyed) broadcast process function (``BroadcastProcessNode``): the keyed broadcast
    runtime with a context that has no keyed state, no timers and no ``apply_to_keyed_state``;
    its non-keyed input arrives on the worker that read it (``routing``: forward)."""

    def __init__(
        self,
        op: BroadcastProcessNode,
        state: StateBackend,
        key_groups: KeyGroupRange,
        max_parallelism: int,
        late: LateRecords,
        dead: DeadLetters,
        retention_ms: int,
    ) -> None:
        super().__init__(op, state, key_groups, max_parallelism, late, dead, retention_ms)
        self._ctx = NonKeyedContext(self, self.broadcast_states)
        self._bctx = _NonKeyedBroadcastContext(self)


class _NonKeyedBroadcastContext(BroadcastContext):
    def apply_to_keyed_state(self, name: str, fn: Callable[[str, KeyedState], Any]) -> NoReturn:
        raise BroadcastStateError(
            f"apply_to_keyed_state({name!r}, ...) in a broadcast process function on a "
            "non-keyed stream: there is no keyed state; key the stream first "
            "(stream.key_by(...).connect(broadcast))"
        )
