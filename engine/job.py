"""The job API: a ``Job`` is a tree of streams from one source to named, queryable operators.

    job = Job("ad-stats", max_parallelism=128)
    (job.source(sources.generator("ads"), timestamp="ts",
                watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000))
        .filter(lambda e: e["event"] == "impression")
        .key_by("id")
        .window(windows.tumbling(ms=10_000), allowed_lateness_ms=5_000)
        .aggregate("impressions", count=agg.count(), total=agg.sum("value")))

Building a job only records the graph; the runtime compiles and runs it.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

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
Node = StatelessNode | SinkNode | KeyByNode


@dataclass(eq=False)
class SourceNode:
    source: Source
    timestamp: TimestampSelector
    watermarks: WatermarkStrategy
    children: list[Node] = field(default_factory=list)


class DataStream:
    """A stream of records; stateless steps chain, ``key_by`` starts keyed processing."""

    def __init__(self, job: Job, children: list[Node]) -> None:
        self._job = job
        self._children = children

    def _add(self, node: StatelessNode) -> DataStream:
        self._children.append(node)
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
        self._children.append(node)
        return KeyedStream(self._job, node)

    def sink(self, sink: Sink) -> DataStream:
        self._children.append(SinkNode(sink))
        return self


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
    """A named dataflow from one source to one or more keyed window operators and sinks."""

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
    ) -> DataStream:
        if self.sources:
            raise JobDefinitionError(
                f"job {self.name!r} already has a source; a job reads from one source"
            )
        if not (isinstance(timestamp, str) and timestamp) and not callable(timestamp):
            raise JobDefinitionError(
                f"timestamp={timestamp!r}: pass a field name (epoch ms) or a function"
            )
        node = SourceNode(source, timestamp, watermarks or WatermarkStrategy())
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
        self.sources[0].source = source

    def replace_sinks(self, sink: Sink) -> None:
        for op in self.operators.values():
            op.sinks[:] = [sink]
