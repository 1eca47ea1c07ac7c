"""The job API: a ``Job`` is a graph of streams from its sources to named, queryable operators.

    job = Job("ad-stats", max_parallelism=128)
    (job.source(sources.generator("ads"), timestamp="ts",
                watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000))
        .filter(lambda e: e["event"] == "impression")
        .key_by("id")
        .window(windows.tumbling(ms=10_000), allowed_lateness_ms=5_000)
        .aggregate("impressions", count=agg.count(), total=agg.sum("value")))

Several sources: each ``job.source(...)`` has its own name, timestamp and watermarks;
``a.union(b)`` merges streams (one node appended under every parent, so downstream steps attach
once), ``a.connect(b).key_by(ka, kb).process(fn, name=...)`` runs a keyed co-process function.

Building a job only records the graph; the runtime compiles and runs it.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from weir.engine import agg as _agg
from weir.engine import evictors as _evictors
from weir.engine import triggers as _triggers
from weir.engine.errors import JobDefinitionError
from weir.engine.sinks import Sink
from weir.engine.sources import Source
from weir.engine.watermarks import WatermarkStrategy
from weir.engine.windows import (
    CountWindows,
    CumulateWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)

if TYPE_CHECKING:
    from weir.engine.joins import IntervalJoin, JoinedStreams

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
RESERVED_FIELDS = frozenset({"key", "start", "end", "final"})

Record = Any
KeySelector = str | Callable[[Record], Any]
TimestampSelector = str | Callable[[Record], int]
StatelessKind = Literal["map", "filter", "flat_map"]


def operator_state_id(name: str) -> int:
    """An operator's state id, from its name: 14 bits (1..0x3FFE), so its derived ids
    (``| 0x4000`` panes, ``| 0x8000`` timers) never meet another operator's."""
    return zlib.crc32(name.encode()) % 0x3FFE + 1


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise JobDefinitionError(
            f"{kind} name {name!r} is not allowed; use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (it appears in URLs)"
        )
    return name


@dataclass(eq=False)
class StatelessNode:
    kind: StatelessKind
    fn: Callable[[Record], Any]
    children: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class SinkNode:
    sink: Sink


@dataclass(eq=False)
class KeyByNode:
    key: KeySelector
    children: list[WindowOperator | ProcessOperator] = field(default_factory=list)


@dataclass(eq=False)
class BroadcastNode:
    """Where a broadcast stream leaves the graph: its records go to every worker (not by key
    group), to the broadcast side of each operator connected to it. ``state_names``: the
    broadcast states those operators may use (Flink's ``MapStateDescriptor``s; empty: any)."""

    state_names: tuple[str, ...]
    children: list[KeyedBroadcastOperator] = field(default_factory=list)


@dataclass(eq=False)
class ForwardNode:
    """Where a non-keyed stream enters a broadcast process function: its records stay on the
    worker that read them (Flink's forward partitioning), with no key."""

    children: list[BroadcastOperator] = field(default_factory=list)


class _StateIds:
    """An operator's state ids, derived from its name."""

    name: str

    @property
    def state_id(self) -> int:
        """Stable id of this operator's state (never 0)."""
        return operator_state_id(self.name)

    @property
    def timer_state_id(self) -> int:
        return self.state_id | 0x8000


@dataclass(eq=False)
class WindowOperator(_StateIds):
    """A keyed window aggregation: the unit of queryable state (``/{job}/{op}/state/{key}``)."""

    name: str
    key: KeySelector
    assigner: WindowAssigner
    allowed_lateness_ms: int
    aggregates: dict[str, _agg.Aggregate]
    sinks: list[Sink] = field(default_factory=list)
    trigger: _triggers.Trigger | None = None
    evictor: _evictors.Evictor | None = None

    @property
    def pane_state_id(self) -> int:
        """Sliding windows keep pre-aggregated panes under this id."""
        return self.state_id | 0x4000

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": "window",
            "window": self.assigner.describe(),
            "allowed_lateness_ms": self.allowed_lateness_ms,
            "aggregates": {
                n: (a.kind if isinstance(a, _agg.Builtin) else "custom")
                for n, a in self.aggregates.items()
            },
            **self._describe_trigger(),
        }

    @property
    def triggered(self) -> bool:
        """Does it run on the triggered window operator (``operators/triggered.py``) rather
        than the accumulator fast path? Count and global windows, a custom trigger, an evictor."""
        return (
            self.trigger is not None
            or self.evictor is not None
            or isinstance(self.assigner, GlobalWindows | CountWindows)
        )

    def _describe_trigger(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if self.trigger is not None:
            shown["trigger"] = self.trigger.describe()
        if self.evictor is not None:
            shown["evictor"] = self.evictor.describe()
        return shown


@dataclass(frozen=True, slots=True)
class OutputTag:
    """Names a side output of a process function (Flink's ``OutputTag``): the function writes
    ``ctx.output(tag, record)``, the job routes it with ``result.side_output(tag).sink(...)``."""

    name: str

    def __post_init__(self) -> None:
        _check_name("output tag", self.name)


@dataclass(eq=False)
class ProcessOperator(_StateIds):
    """A keyed process function: per-record code with keyed state and timers, queryable as
    ``/{job}/{name}/state/{key}`` (its states by name). ``side_outputs``: the sinks of each
    declared output tag (none attached: the default file, ``outputs.tagged_sinks``)."""

    name: str
    key: KeySelector
    function: Any
    sinks: list[Sink] = field(default_factory=list)
    side_outputs: dict[str, list[Sink]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": "process",
            "function": _qualname(self.function),
            "side_outputs": sorted(self.side_outputs),
        }


def _qualname(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


Operator = WindowOperator | ProcessOperator
Node = StatelessNode | SinkNode | KeyByNode | BroadcastNode | ForwardNode


@dataclass(eq=False)
class SourceNode:
    source: Source
    timestamp: TimestampSelector
    watermarks: WatermarkStrategy
    children: list[Node] = field(default_factory=list)
    name: str = "source-0"  # stable: a job of several sources keys its checkpoint positions by it


class DataStream:
    """A stream of records; stateless steps chain, ``key_by`` starts keyed processing."""

    def __init__(self, job: Job, children: list[Node], *, more: Sequence[list[Node]] = ()) -> None:
        self._job = job
        # a union's stream has several parents: each step is appended under every one of them
        self._targets: list[list[Node]] = [children, *more]

    def _attach(self, node: Node) -> None:
        for target in self._targets:
            target.append(node)

    def _add(self, node: StatelessNode) -> DataStream:
        self._attach(node)
        return DataStream(self._job, node.children)

    def map(self, fn: Callable[[Record], Any]) -> DataStream:
        return self._add(StatelessNode("map", _callable("map", fn)))

    def filter(self, fn: Callable[[Record], Any]) -> DataStream:
        return self._add(StatelessNode("filter", _callable("filter", fn)))

    def flat_map(self, fn: Callable[[Record], Iterable[Any]]) -> DataStream:
        return self._add(StatelessNode("flat_map", _callable("flat_map", fn)))

    def key_by(self, key: KeySelector) -> KeyedStream:
        if not (isinstance(key, str) and key) and not callable(key):
            raise JobDefinitionError(
                f"key_by({key!r}): pass a field name or a function of the record"
            )
        node = KeyByNode(key)
        self._attach(node)
        return KeyedStream(self._job, node)

    def sink(self, sink: Sink) -> DataStream:
        self._attach(SinkNode(sink))
        return self

    def union(self, *others: DataStream) -> DataStream:
        """One stream of this one's records and every other's (Flink's ``union``): a step
        attached to it runs once for each; its watermark is the minimum of theirs."""
        if not others:
            raise JobDefinitionError("union(): pass one or more streams of the same job")
        for other in others:
            self._same_job("union", other)
        targets = [t for s in (self, *others) for t in s._targets]
        return DataStream(self._job, targets[0], more=targets[1:])

    @overload
    def connect(self, other: DataStream) -> ConnectedStreams: ...

    @overload
    def connect(self, other: BroadcastStream) -> BroadcastConnectedStream: ...

    def connect(
        self, other: DataStream | BroadcastStream
    ) -> ConnectedStreams | BroadcastConnectedStream:
        """Two streams for a co-process function: ``.key_by(key1, key2).process(fn, name=...)``
        with ``fn.process1`` for this stream's records and ``fn.process2`` for ``other``'s.
        With a broadcast stream (``broadcast``): a (non-keyed) broadcast process function,
        ``.process(fn, name=...)``, which sees this stream's records on the worker that read
        them."""
        if isinstance(other, BroadcastStream) and other.job is self._job:
            node = ForwardNode()
            self._attach(node)
            return BroadcastConnectedStream(self._job, node, other)
        return ConnectedStreams(self, self._same_job("connect", other))

    def _same_job(self, verb: str, other: object) -> DataStream:
        if not isinstance(other, DataStream):
            raise JobDefinitionError(
                f"{verb}({other!r}): pass a DataStream (what job.source(...), map, filter or "
                "flat_map return)"
            )
        if other._job is not self._job:
            raise JobDefinitionError(
                f"{verb}(): the streams belong to jobs {self._job.name!r} and "
                f"{other._job.name!r}; a job can only {verb} its own streams"
            )
        return other

    def broadcast(self, *state_names: str) -> BroadcastStream:
        """This stream sent whole to every worker (Flink's ``broadcast(descriptors...)``), for
        ``keyed.connect(it).process(fn, name=...)``. ``state_names``: the broadcast states its
        functions keep (none named: any name)."""
        return BroadcastStream(self._job, self._attach, _state_names(state_names))

    def join(self, other: DataStream) -> JoinedStreams:
        """A window join (Flink's): ``.where(key).equal_to(other_key).window(assigner)
        .apply(fn=None, *, name=...)`` pairs the records of one key in one window
        (``weir.engine.joins``)."""
        from weir.engine.joins import JoinedStreams  # built on this module

        self._same_job("join", other)
        return JoinedStreams(self, other)


class KeyedStream:
    def __init__(self, job: Job, node: KeyByNode) -> None:
        self._job = job
        self._node = node

    def window(self, assigner: WindowAssigner, allowed_lateness_ms: int = 0) -> WindowedStream:
        if not isinstance(
            assigner,
            TumblingWindows
            | SlidingWindows
            | SessionWindows
            | CumulateWindows
            | GlobalWindows
            | CountWindows,
        ):
            raise JobDefinitionError(
                f"window({assigner!r}): pass a window assigner such as windows.tumbling(ms=10_000)"
            )
        if not isinstance(allowed_lateness_ms, int) or allowed_lateness_ms < 0:
            raise JobDefinitionError(
                f"allowed_lateness_ms={allowed_lateness_ms!r} must be an integer >= 0"
            )
        return WindowedStream(self._job, self._node, assigner, allowed_lateness_ms)

    def process(self, fn: Any, *, name: str) -> ResultStream:
        """A keyed process function: ``fn(event, ctx)``, or an object with
        ``process(event, ctx)`` and optionally ``on_timer(timestamp, ctx)``. ``ctx`` has
        ``key``, ``timestamp``, ``watermark``, ``value(name)``, ``list(name)``, ``map(name)``
        state, ``register_event_time_timer(t)``, ``register_processing_time_timer(t)``,
        ``emit(record)`` and ``output(tag, record)`` (a side output: ``side_output(tag)`` of
        the result routes it)."""
        _check_name("operator", name)
        if not callable(fn) and not callable(getattr(fn, "process", None)):
            raise JobDefinitionError(
                f"process({fn!r}): pass a function fn(event, ctx) or an object with "
                "process(event, ctx) and optionally on_timer(timestamp, ctx)"
            )
        op = ProcessOperator(name, self._node.key, fn)
        self._job._register(op)
        self._node.children.append(op)
        return ResultStream(op)

    @overload
    def connect(self, other: KeyedStream) -> ConnectedKeyedStreams: ...

    @overload
    def connect(self, other: BroadcastStream) -> BroadcastConnectedStream: ...

    def connect(
        self, other: KeyedStream | BroadcastStream
    ) -> ConnectedKeyedStreams | BroadcastConnectedStream:
        """This keyed stream and ``other`` for a keyed co-process function (``process``), or
        with a broadcast stream (``DataStream.broadcast``) for a keyed broadcast process
        function."""
        if isinstance(other, BroadcastStream) and other.job is self._job:
            return BroadcastConnectedStream(self._job, self._node, other)
        if not isinstance(other, KeyedStream) or other._job is not self._job:
            raise JobDefinitionError(
                f"connect({other!r}): pass a keyed stream of the same job, e.g. "
                "a.key_by('id').connect(b.key_by('id')), or a broadcast stream of it, e.g. "
                "events.key_by('id').connect(rules.broadcast('rules'))"
            )
        if other._node is self._node:
            raise JobDefinitionError(
                "connect(): a keyed stream cannot be connected to itself; call key_by on each "
                "side (a.connect(a).key_by(k1, k2)) so each input has its own key_by"
            )
        return ConnectedKeyedStreams(self._job, self._node, other._node)

    def interval_join(self, other: KeyedStream) -> IntervalJoin:
        """An interval join (Flink's): ``.between(lower_ms, upper_ms)``, optionally
        ``.lower_bound_exclusive()``/``.upper_bound_exclusive()``, then ``.process(fn=None, *,
        name=...)`` pairs records of one key with ``other.ts - this.ts`` within the bounds
        (``weir.engine.joins``)."""
        from weir.engine.joins import IntervalJoin  # built on this module

        if not isinstance(other, KeyedStream) or other._job is not self._job:
            raise JobDefinitionError(
                f"interval_join({other!r}): pass a keyed stream of the same job, e.g. "
                "a.key_by('id').interval_join(b.key_by('id'))"
            )
        return IntervalJoin(self, other)


class WindowedStream:
    def __init__(
        self, job: Job, node: KeyByNode, assigner: WindowAssigner, allowed_lateness_ms: int
    ) -> None:
        self._job = job
        self._node = node
        self._assigner = assigner
        self._lateness = allowed_lateness_ms
        self._trigger: _triggers.Trigger | None = None
        self._evictor: _evictors.Evictor | None = None
        if isinstance(assigner, CountWindows):  # Flink's countWindow(n[, m])
            if assigner.slide is None:
                self._trigger = _triggers.purging(_triggers.count(assigner.size))
            else:
                self._trigger = _triggers.count(assigner.slide)
                self._evictor = _evictors.count(assigner.size)
        elif isinstance(assigner, GlobalWindows):
            self._trigger = _triggers.never()

    def aggregate(self, name: str, **aggregates: object) -> ResultStream:
        """A named, queryable window aggregation; each keyword is one result field."""
        _check_name("operator", name)
        if not aggregates:
            raise JobDefinitionError(
                f"aggregate({name!r}) has no aggregates; add e.g. count=agg.count()"
            )
        clash = sorted(RESERVED_FIELDS & aggregates.keys())
        if clash:
            raise JobDefinitionError(
                f"aggregate({name!r}): field name(s) {', '.join(clash)} are reserved for the "
                "result record; rename them"
            )
        try:
            built = {n: _agg.as_aggregate(a, n) for n, a in aggregates.items()}
        except (TypeError, ValueError) as exc:
            raise JobDefinitionError(f"aggregate({name!r}): {exc}") from None
        op = WindowOperator(
            name, self._node.key, self._assigner, self._lateness, built,
            trigger=self._trigger, evictor=self._evictor,
        )  # fmt: skip
        self._job._register(op)
        self._node.children.append(op)
        return ResultStream(op)

    def trigger(self, trigger: _triggers.Trigger) -> WindowedStream:
        """When the window fires (emits its aggregate) and purges, instead of the assigner's
        default (Flink's ``WindowedStream.trigger``); see ``weir.triggers``."""
        if not isinstance(trigger, _triggers.Trigger):
            raise JobDefinitionError(
                f"trigger({trigger!r}): pass a trigger from weir.triggers, e.g. "
                "triggers.count(100) or triggers.purging(triggers.count(100))"
            )
        self._check_triggerable("trigger")
        self._trigger = trigger
        return self

    def evictor(self, evictor: _evictors.Evictor) -> WindowedStream:
        """Which records the aggregate sees, removed before (or after) it runs (Flink's
        ``WindowedStream.evictor``); see ``weir.evictors``. The window then keeps its records."""
        if not isinstance(evictor, _evictors.Evictor):
            raise JobDefinitionError(
                f"evictor({evictor!r}): pass an evictor from weir.evictors, e.g. "
                "evictors.count(100) or evictors.time(10_000)"
            )
        self._check_triggerable("evictor")
        self._evictor = evictor
        return self

    def _check_triggerable(self, what: str) -> None:
        """Merging (session) and cumulating windows keep their own firing rules here."""
        if isinstance(self._assigner, SessionWindows | CumulateWindows):
            kind = "session" if isinstance(self._assigner, SessionWindows) else "cumulate"
            raise JobDefinitionError(
                f"{what}(...) on {kind} windows is not supported; use it on tumbling, sliding, "
                "count or global windows (windows.global_windows() with a trigger covers "
                "most custom firing rules)"
            )


class ResultStream:
    """The output of an operator: window results ``{"key", "start", "end", <aggregates>,
    "final"}``, or what a process function emits."""

    def __init__(self, op: WindowOperator | ProcessOperator) -> None:
        self.operator = op

    def sink(self, sink: Sink) -> ResultStream:
        self.operator.sinks.append(sink)
        return self

    def side_output(self, tag: OutputTag) -> SideOutputStream:
        """The records the process function writes with ``ctx.output(tag, record)`` (Flink's
        ``getSideOutput``). Declaring the tag is what lets the function use it; with no
        ``.sink(...)`` they go to ``side-<operator>-<tag>.jsonl`` in the job's directory."""
        op = self.operator
        if not isinstance(op, ProcessOperator):
            raise JobDefinitionError(
                f"side_output({tag!r}) on window operator {op.name!r}: side outputs come from "
                "process functions (ctx.output); a window's late records have their own output "
                "(--late-sink)"
            )
        if not isinstance(tag, OutputTag):
            raise JobDefinitionError(
                f"side_output({tag!r}): pass an OutputTag, e.g. OutputTag('alerts')"
            )
        op.side_outputs.setdefault(tag.name, [])
        return SideOutputStream(op, tag)


class SideOutputStream:
    """One side output of a process function, to be routed to sinks."""

    def __init__(self, op: ProcessOperator, tag: OutputTag) -> None:
        self.operator = op
        self.tag = tag

    def sink(self, sink: Sink) -> SideOutputStream:
        self.operator.side_outputs[self.tag.name].append(sink)
        return self


def _callable(kind: str, fn: object) -> Callable[[Record], Any]:
    if not callable(fn):
        raise JobDefinitionError(f"{kind}({fn!r}): pass a function of one record")
    return fn


class Job:
    """A named dataflow from one or more sources to keyed, queryable operators and sinks."""

    def __init__(self, name: str, *, max_parallelism: int = 128) -> None:
        self.name = _check_name("job", name)
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= 32768:
            raise JobDefinitionError(
                f"max_parallelism={max_parallelism!r} must be an integer in 1..32768"
            )
        self.max_parallelism = max_parallelism
        self.sources: list[SourceNode] = []
        self.operators: dict[str, WindowOperator | ProcessOperator] = {}

    def __repr__(self) -> str:
        return f"Job({self.name!r}, operators={list(self.operators)})"

    def source(
        self,
        source: Source,
        *,
        timestamp: TimestampSelector = "ts",
        watermarks: WatermarkStrategy | None = None,
        name: str | None = None,
    ) -> DataStream:
        """A source of the job, with its own timestamp and watermarks. ``name`` (default
        ``source-<i>``) is how checkpoints of a job of several sources know its positions:
        keep it when the job file changes."""
        name = f"source-{len(self.sources)}" if name is None else name
        _check_name("source", name)
        if any(s.name == name for s in self.sources):
            raise JobDefinitionError(
                f"job {self.name!r} has two sources named {name!r}; give each its own "
                "job.source(..., name=...)"
            )
        if not (isinstance(timestamp, str) and timestamp) and not callable(timestamp):
            raise JobDefinitionError(
                f"timestamp={timestamp!r}: pass a field name (epoch ms) or a function"
            )
        node = SourceNode(source, timestamp, watermarks or WatermarkStrategy(), name=name)
        self.sources.append(node)
        return DataStream(self, node.children)

    def sql(
        self,
        name: str,
        query: str,
        *,
        tables: dict[str, DataStream],
        functions: dict[str, _agg.AggregateFunction] | None = None,
        allowed_lateness_ms: int = 0,
    ) -> ResultStream:
        """A windowed SQL query (Flink's syntax) over ``tables`` (name -> a stream of this job),
        as the queryable operator ``name``; ``functions`` name user-defined aggregates."""
        from weir.engine.sql.build import add_view  # the SQL front end builds on this module

        return add_view(
            self, name, query, tables=tables, functions=functions,
            allowed_lateness_ms=allowed_lateness_ms,
        )  # fmt: skip

    def _register(self, op: WindowOperator | ProcessOperator) -> None:
        if op.name in self.operators:
            raise JobDefinitionError(f"job {self.name!r} has two operators named {op.name!r}")
        for other in self.operators.values():
            if other.state_id == op.state_id:
                raise JobDefinitionError(
                    f"operators {other.name!r} and {op.name!r} map to the same state id; "
                    "rename one of them"
                )
        self.operators[op.name] = op

    def validate(self) -> None:
        _check_name("job", self.name)  # again: a job file may have reassigned it (state paths)
        if not self.sources:
            raise JobDefinitionError(
                f"job {self.name!r} has no source; call job.source(...) in the job file"
            )

    def replace_source(self, source: Source) -> None:
        self.validate()
        if len(self.sources) > 1:
            names = ", ".join(s.name for s in self.sources)
            raise JobDefinitionError(
                f"job {self.name!r} reads {len(self.sources)} sources ({names}); --source "
                "replaces the source of a one-source job: drop --source and set each source "
                "in the job file"
            )
        self.sources[0].source = source

    def replace_sinks(self, sink: Sink) -> None:
        for op in self.operators.values():
            op.sinks[:] = [sink]

    def describe_sources(self) -> str:
        """The source's URL; for several, ``name=URL`` each."""
        if len(self.sources) == 1:
            return self.sources[0].source.describe()
        return ", ".join(f"{s.name}={s.source.describe()}" for s in self.sources)


@dataclass(eq=False)
class CoProcessOperator(ProcessOperator):
    """A keyed co-process function (Flink's ``KeyedCoProcessFunction``): ``process1`` gets the
    first input's records, ``process2`` the second's; both share the key's state and timers,
    queryable and checkpointed as a one-input process function's. ``second``: the key_by node
    of the second input (``key`` is the first's selector)."""

    second_key: KeySelector = ""
    second: KeyByNode | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "type": "co_process"}


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
        op = CoProcessOperator(
            name, self._first.key, fn, second_key=self._second.key, second=self._second
        )
        self._job._register(op)
        self._first.children.append(op)
        self._second.children.append(op)
        return ResultStream(op)


# -- broadcast state (Flink's broadcast state pattern) -------------------------------------------


@dataclass(eq=False)
class KeyedBroadcastOperator(ProcessOperator):
    """A keyed broadcast process function (Flink's ``KeyedBroadcastProcessFunction``): the
    keyed input's records go to ``function.process_element`` (keyed state, timers, broadcast
    state read-only), the broadcast input's to ``function.process_broadcast_element`` on every
    worker (broadcast state writable, ``apply_to_keyed_state``). Its keyed state is queryable
    as a process function's; its broadcast state is checkpointed once per worker."""

    broadcast: BroadcastNode | None = field(default=None, repr=False)

    @property
    def state_names(self) -> tuple[str, ...]:
        return () if self.broadcast is None else self.broadcast.state_names

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "type": "keyed_broadcast",
            "broadcast_states": list(self.state_names),
        }


def _state_names(names: tuple[str, ...]) -> tuple[str, ...]:
    for n in names:
        _check_name("broadcast state", n)
    if len(set(names)) != len(names):
        raise JobDefinitionError(
            f"broadcast{names!r} names a broadcast state twice; name each once"
        )
    return names


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
            op: KeyedBroadcastOperator = BroadcastOperator(name, "", fn, broadcast=node)
            self._job._register(op)
            first.children.append(op)  # type: ignore[arg-type]  # BroadcastOperator, built here
        else:
            op = KeyedBroadcastOperator(name, first.key, fn, broadcast=node)
            self._job._register(op)
            first.children.append(op)
        node.children.append(op)
        return ResultStream(op)


@dataclass(eq=False)
class BroadcastOperator(KeyedBroadcastOperator):
    """A (non-keyed) broadcast process function (Flink's ``BroadcastProcessFunction``): its
    other input's records go to ``process_element`` on the worker that read them, with the
    broadcast states read-only and no keyed state or timers; the broadcast input's as a keyed
    broadcast function's, without ``apply_to_keyed_state``."""

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "type": "broadcast"}
