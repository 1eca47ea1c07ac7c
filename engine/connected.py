"""Two-input streams: connected streams for co-process functions, broadcast streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.base.errors import JobDefinitionError

if TYPE_CHECKING:
    from weir.engine.job import Job
    from weir.engine.streams import DataStream


from weir.engine.nodes import (
    BroadcastNode,
    BroadcastProcessNode,
    CoProcessNode,
    ForwardNode,
    KeyByNode,
    KeyedBroadcastNode,
    KeySelector,
    Node,
    _check_name,
)
from weir.engine.results import ResultStream


class ConnectedStreams:
    """Two streams of one job, not keyed yet (``DataStream.connect``)."""

    def __init__(self, first: DataStream, second: DataStream) -> None:
        self._first = first
        self._second = second

    def key_by(self, key1: KeySelector, key2: KeySelector) -> ConnectedKeyedStreams:
        """Key the first input by ``key1`` and the second by ``key2``; records whose keys are
        equal meet in the same key's state."""
        a = self._first.key_by(key1)
        b = self._second.key_by(key2)
        return ConnectedKeyedStreams(a._job, a._node, b._node)


class ConnectedKeyedStreams:
    """Two keyed streams of one job, for a keyed co-process function."""

    def __init__(self, job: Job, first: KeyByNode, second: KeyByNode) -> None:
        self._job = job
        self._first = first
        self._second = second

    def process(self, fn: Any, *, name: str) -> ResultStream:
        """A keyed co-process function: an object with ``process1(event, ctx)`` (first input),
        ``process2(event, ctx)`` (second input) and optionally ``on_timer(timestamp, ctx)``,
        with the same ``ctx`` as ``KeyedStream.process``. Its watermark is the minimum of its
        two inputs'."""
        _check_name("operator", name)
        if not (
            callable(getattr(fn, "process1", None)) and callable(getattr(fn, "process2", None))
        ):
            raise JobDefinitionError(
                f"process({fn!r}) on connected streams: pass an object with process1(event, "
                "ctx), process2(event, ctx) and optionally on_timer(timestamp, ctx)"
            )
        op = CoProcessNode(
            name, self._first.key, fn, second_key=self._second.key, second=self._second
        )
        self._job._register(op)
        self._first.children.append(op)
        self._second.children.append(op)
        return ResultStream(op)


class BroadcastStream:
    """A stream whose every record reaches every worker (``DataStream.broadcast``)."""

    def __init__(
        self, job: Job, attach: Callable[[Node], None], state_names: tuple[str, ...]
    ) -> None:
        self.job = job
        self._attach = attach  # under the stream's parent (each of a union's)
        self.state_names = state_names
        self._node: BroadcastNode | None = None

    def __repr__(self) -> str:
        return f"BroadcastStream(state_names={self.state_names!r})"

    def node(self) -> BroadcastNode:
        """The graph node, added once the stream is connected (a broadcast stream nobody
        reads costs nothing)."""
        if self._node is None:
            self._node = BroadcastNode(self.state_names)
            self._attach(self._node)
        return self._node


class BroadcastConnectedStream:
    """A stream connected to a broadcast stream: keyed (``KeyedStream.connect``) for a keyed
    broadcast process function, or not (``DataStream.connect``) for a broadcast process
    function."""

    def __init__(
        self, job: Job, first: KeyByNode | ForwardNode, broadcast: BroadcastStream
    ) -> None:
        self._job = job
        self._first = first
        self._broadcast = broadcast

    def process(self, fn: Any, *, name: str) -> ResultStream:
        """A keyed broadcast process function (Flink's ``KeyedBroadcastProcessFunction``): an
        object with ``process_element(event, ctx)`` (the keyed stream's records: keyed state,
        timers, ``ctx.broadcast_state(name)`` read-only), ``process_broadcast_element(event,
        ctx)`` (the broadcast stream's, on every worker: ``ctx.broadcast_state(name)``
        writable, ``ctx.apply_to_keyed_state(name, fn)``) and optionally ``on_timer(timestamp,
        ctx)``. Its keyed state is queryable at ``/{job}/{name}/state/{key}``. On a non-keyed
        stream, a broadcast process function (Flink's ``BroadcastProcessFunction``): the same
        without keyed state, timers or ``apply_to_keyed_state``."""
        _check_name("operator", name)
        entries = ("process_element", "process_broadcast_element")
        if not all(callable(getattr(fn, e, None)) for e in entries):
            raise JobDefinitionError(
                f"process({fn!r}) on a broadcast-connected stream: pass an object with "
                "process_element(event, ctx), process_broadcast_element(event, ctx) and "
                "optionally on_timer(timestamp, ctx), e.g. a KeyedBroadcastProcessFunction"
            )
        node = self._broadcast.node()
        first = self._first
        if isinstance(first, ForwardNode):
            op: KeyedBroadcastNode = BroadcastProcessNode(name, "", fn, broadcast=node)
            self._job._register(op)
            first.children.append(op)  # type: ignore[arg-type]  # BroadcastProcessNode, built here
        else:
            op = KeyedBroadcastNode(name, first.key, fn, broadcast=node)
            self._job._register(op)
            first.children.append(op)
        node.children.append(op)
        return ResultStream(op)
