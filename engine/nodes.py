"""The job graph's nodes, as the job API records them (``weir.engine.job``), and ``OutputTag``.

A leaf of the job API: it imports the definitions a node holds (aggregates, windows, triggers,
sources, sinks) and none of the streams that build the graph, so the runtime, the joins and the
backfill take node types from here (as Flink's operators take ``OutputTag`` from flink-core),
never from the ``weir.engine.job`` façade.

Every class here is a *description*: ``WindowNode`` is a keyed window aggregation as the job
declares it; the code that runs it on a worker is the runtime's (``WindowRuntime`` in
``weir.engine.runtime.operators``), which is what Flink calls the ``WindowOperator``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from weir.base.errors import JobDefinitionError
from weir.engine import agg as _agg
from weir.engine import triggers as _triggers
from weir.engine.kernels import ir
from weir.engine.sinks import Sink
from weir.engine.sources import Source
from weir.engine.watermarks import WatermarkStrategy
from weir.engine.windows import (
    CountWindows,
    GlobalWindows,
    WindowAssigner,
)

if TYPE_CHECKING:  # an evictor's module loads with the first evictor a job makes
    from weir.engine import evictors as _evictors

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


RESERVED_FIELDS = frozenset({"op", "key", "start", "end", "final"})


Record = Any


KeySelector = str | Callable[[Record], Any]


TimestampSelector = str | Callable[[Record], int]


StatelessKind = Literal["map", "filter", "flat_map", "with_columns", "map_batch", "filter_batch"]


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


# a declared column: name, type (str, bool, int8, int16, int32, int64 or float), NOT NULL
ColumnType = tuple[str, str, bool]


@dataclass(frozen=True)
class SqlStep:
    """What a SQL step is, beside the function the per-record chain calls: its ``text`` as
    ``weir explain`` shows it (``WHERE event = 'impression'``); ``why_records``: why the
    clause is not an expression the columnar source can evaluate (None: it is, the node's
    ``expr``); ``check``: a ``CREATE TABLE``'s declared columns, for the step that enforces
    them (``sql.columns.checker``), so the columnar source can enforce them on columns."""

    text: str
    why_records: str | None = None
    check: tuple[ColumnType, ...] | None = None


@dataclass(eq=False)
class StatelessNode:
    """A stateless step. ``fn`` is what the per-record chain calls: the user's function, or
    for an expression the IR compiled to a function of one record. ``expr``: a filter's
    predicate when it is an expression; ``columns``: a ``with_columns`` step's expressions by
    output field (the columnar loop runs these, not ``fn``). ``map_batch`` and
    ``filter_batch`` steps call ``fn`` on a batch of columns (``weir.engine.batches``)."""

    kind: StatelessKind
    fn: Callable[[Record], Any]
    children: list[Node] = field(default_factory=list)
    expr: ir.Expr | None = None
    columns: dict[str, ir.Expr] | None = None
    sql: SqlStep | None = None


@dataclass(eq=False)
class SinkNode:
    sink: Sink


@dataclass(eq=False)
class WindowCall:
    """A ``window(...)`` on a keyed stream, until an ``aggregate(...)`` makes it an operator:
    a window left without one is refused when the job is validated (it would compute
    nothing)."""

    assigner: WindowAssigner
    aggregated: bool = False


@dataclass(eq=False)
class KeyByNode:
    """Where records are keyed. ``key``: a field name or a function of the record (for an
    expression, its IR compiled to one); ``key_expr``: the key's IR when it is an expression
    other than a plain field (``key_by(col("id"))`` is ``key_by("id")``)."""

    key: KeySelector
    children: list[WindowNode | ProcessNode] = field(default_factory=list)
    windows: list[WindowCall] = field(default_factory=list)
    key_expr: ir.Expr | None = None


@dataclass(eq=False)
class BroadcastNode:
    """Where a broadcast stream leaves the graph: its records go to every worker (not by key
    group), to the broadcast side of each operator connected to it. ``state_names``: the
    broadcast states those operators may use (Flink's ``MapStateDescriptor``s; empty: any)."""

    state_names: tuple[str, ...]
    children: list[KeyedBroadcastNode] = field(default_factory=list)


@dataclass(eq=False)
class ForwardNode:
    """Where a non-keyed stream enters a broadcast process function: its records stay on the
    worker that read them (Flink's forward partitioning), with no key."""

    children: list[BroadcastProcessNode] = field(default_factory=list)


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
class WindowNode(_StateIds):
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
class ProcessNode(_StateIds):
    """A keyed process function: per-record code with keyed state and timers, queryable as
    ``/{job}/{name}/state/{key}`` (its states by name). ``side_outputs``: the sinks of each
    declared output tag (none attached: the default file, ``outputs.tagged_sinks``)."""

    name: str
    key: KeySelector
    function: Any
    sinks: list[Sink] = field(default_factory=list)
    side_outputs: dict[str, list[Sink]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "type": "process",
            "function": _qualname(self.function),
            "side_outputs": sorted(self.side_outputs),
        }
        # a library's function says more of itself (a CEP pattern: its steps, for weir explain)
        more = getattr(self.function, "describe_function", None)
        if callable(more):
            out.update(more())
        return out


def _qualname(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


OperatorNode = WindowNode | ProcessNode


Node = StatelessNode | SinkNode | KeyByNode | BroadcastNode | ForwardNode


@dataclass(eq=False)
class SourceNode:
    """A source with its time attribute: ``timestamp`` is a field name or a function of the
    record (for an expression, its IR compiled to one); ``timestamp_expr`` the IR of an
    expression other than a plain field."""

    source: Source
    timestamp: TimestampSelector
    watermarks: WatermarkStrategy
    children: list[Node] = field(default_factory=list)
    name: str = "source-0"  # stable: a job of several sources keys its checkpoint positions by it
    timestamp_expr: ir.Expr | None = None


@dataclass(eq=False)
class CoProcessNode(ProcessNode):
    """A keyed co-process function (Flink's ``KeyedCoProcessFunction``): ``process1`` gets the
    first input's records, ``process2`` the second's; both share the key's state and timers,
    queryable and checkpointed as a one-input process function's. ``second``: the key_by node
    of the second input (``key`` is the first's selector)."""

    second_key: KeySelector = ""
    second: KeyByNode | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "type": "co_process"}


@dataclass(eq=False)
class KeyedBroadcastNode(ProcessNode):
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


@dataclass(eq=False)
class BroadcastProcessNode(KeyedBroadcastNode):
    """A (non-keyed) broadcast process function (Flink's ``BroadcastProcessFunction``): its
    other input's records go to ``process_element`` on the worker that read them, with the
    broadcast states read-only and no keyed state or timers; the broadcast input's as a keyed
    broadcast function's, without ``apply_to_keyed_state``."""

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "type": "broadcast"}


def unfinished(sources: list[SourceNode]) -> str | None:
    """What in the graph below ``sources`` was started and leads nowhere, and what to add: a
    ``window(...)`` without ``aggregate(...)``, a ``key_by`` with nothing after it, a stream
    connected to a broadcast stream without ``process``. Such a step would read every record
    and compute nothing, so ``Job.validate`` refuses the job instead (None: nothing is)."""
    seen: set[int] = set()
    pending = [child for s in sources for child in s.children]
    while pending:
        node = pending.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, StatelessNode):
            pending.extend(node.children)
        elif isinstance(node, KeyByNode):
            found = _unfinished_keyed(node)
            if found is not None:
                return found
        elif isinstance(node, ForwardNode) and not node.children:
            return (
                "a stream connected to a broadcast stream (stream.connect(rules.broadcast()))"
                " has no process function after it, so it computes nothing: add "
                '.process(fn, name="...") with a BroadcastProcessFunction'
            )
    return None


def _unfinished_keyed(node: KeyByNode) -> str | None:
    keyed = f"key_by({_shown_key(node.key)})"
    for call in node.windows:
        if not call.aggregated:
            return (
                f"{keyed}.window({_shown_assigner(call.assigner)}) has no aggregate, so it "
                f'computes nothing: add .aggregate("name", count=agg.count()) after the window'
            )
    if not node.children:
        return (
            f"{keyed} has nothing after it, so it computes nothing: add "
            '.window(...).aggregate("name", ...) or .process(fn, name="...") after it'
        )
    return None


def _shown_key(key: KeySelector) -> str:
    return repr(key) if isinstance(key, str) else _qualname(key)


def _shown_assigner(assigner: WindowAssigner) -> str:
    shown = dict(assigner.describe())
    kind = shown.pop("type", type(assigner).__name__)
    if shown.get("time") == "event":  # the default: said only when it is processing time
        del shown["time"]
    return f"{kind}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
