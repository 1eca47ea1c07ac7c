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

from weir.base.errors import JobDefinitionError
from weir.engine import agg as _agg
from weir.engine.connected import (
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedKeyedStreams,
    ConnectedStreams,
)
from weir.engine.expressions import Expr
from weir.engine.expressions import steps as _steps
from weir.engine.nodes import (
    NAME_PATTERN,
    RESERVED_FIELDS,
    BroadcastNode,
    BroadcastProcessNode,
    CoProcessNode,
    ForwardNode,
    KeyByNode,
    KeyedBroadcastNode,
    KeySelector,
    Node,
    OperatorNode,
    OutputTag,
    ProcessNode,
    Record,
    SinkNode,
    SourceNode,
    StatelessKind,
    StatelessNode,
    TimestampSelector,
    WindowNode,
    _check_name,
    operator_state_id,
    unfinished,
)
from weir.engine.results import ResultStream, SideOutputStream
from weir.engine.sinks import Sink
from weir.engine.sources import Source
from weir.engine.streams import DataStream, KeyedStream, _unbound
from weir.engine.watermarks import WatermarkStrategy
from weir.engine.windowed import WindowedStream

__all__ = [
    "BroadcastConnectedStream",
    "BroadcastNode",
    "BroadcastProcessNode",
    "BroadcastStream",
    "CoProcessNode",
    "ConnectedKeyedStreams",
    "ConnectedStreams",
    "DataStream",
    "ForwardNode",
    "Job",
    "KeyByNode",
    "KeySelector",
    "KeyedBroadcastNode",
    "KeyedStream",
    "NAME_PATTERN",
    "Node",
    "OperatorNode",
    "OutputTag",
    "ProcessNode",
    "RESERVED_FIELDS",
    "Record",
    "ResultStream",
    "SideOutputStream",
    "SinkNode",
    "SourceNode",
    "StatelessKind",
    "StatelessNode",
    "TimestampSelector",
    "WindowNode",
    "WindowedStream",
    "operator_state_id",
]


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
        self.operators: dict[str, WindowNode | ProcessNode] = {}

    def __repr__(self) -> str:
        return f"Job({self.name!r}, operators={list(self.operators)})"

    def source(
        self,
        source: Source,
        *,
        timestamp: TimestampSelector | Expr = "ts",
        watermarks: WatermarkStrategy | None = None,
        name: str | None = None,
    ) -> DataStream:
        """A source of the job, with its own timestamp and watermarks. ``timestamp``: the
        field holding the event time (epoch ms), a function of the record, or an expression
        (``col("ts_s") * 1000``; ``col("ts")`` is ``"ts"``). ``name`` (default
        ``source-<i>``) is how checkpoints of a job of several sources know its positions:
        keep it when the job file changes."""
        name = f"source-{len(self.sources)}" if name is None else name
        _check_name("source", name)
        if any(s.name == name for s in self.sources):
            raise JobDefinitionError(
                f"job {self.name!r} has two sources named {name!r}; give each its own "
                "job.source(..., name=...)"
            )
        timestamp_expr = None
        if isinstance(timestamp, Expr):
            timestamp, timestamp_expr = _steps.selector(timestamp, _steps.TIME_NEEDS)
        elif not (isinstance(timestamp, str) and timestamp) and not callable(timestamp):
            raise JobDefinitionError(
                f"timestamp={timestamp!r}: pass a field name (epoch ms), a function or an "
                "expression"
            )
        node = SourceNode(
            source, timestamp, watermarks or WatermarkStrategy(), name=name,
            timestamp_expr=timestamp_expr,
        )  # fmt: skip
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
        state_ttl_ms: int | None = None,
        primary_keys: dict[str, tuple[str, ...]] | None = None,
    ) -> ResultStream:
        """A SQL query (Flink's syntax) over ``tables`` (name -> a stream of this job), as the
        queryable operator ``name``; ``functions`` name user-defined aggregates. A query grouped
        without a window is a continuous aggregate and needs ``state_ttl_ms``, its idle-state
        retention (Flink's ``table.exec.state.ttl``; 0 keeps every key forever).
        ``primary_keys`` declares tables' primary keys (table -> columns): a temporal join's
        versioned table (``JOIN rates FOR SYSTEM_TIME AS OF o.ts``) needs one. The SQL
        library (``weir.engine.sql``, loaded with ``weir.engine``) binds its body: SQL builds
        on the job API, which never imports it."""
        raise _unbound("Job.sql")

    def _register(self, op: WindowNode | ProcessNode) -> None:
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
        """Refuse a job that cannot run as written: no source, or a step that leads nowhere
        (a window without an aggregate, a ``key_by`` with nothing after it).

        Raises:
            JobDefinitionError: naming what is missing and what to add.
        """
        _check_name("job", self.name)  # again: a job file may have reassigned it (state paths)
        if not self.sources:
            raise JobDefinitionError(
                f"job {self.name!r} has no source; call job.source(...) in the job file"
            )
        dangling = unfinished(self.sources)
        if dangling is not None:
            raise JobDefinitionError(f"job {self.name!r}: {dangling}")

    def replace_source(self, source: Source) -> None:
        """Read ``source`` instead of the job's own (``weir run --source``).

        Raises:
            JobDefinitionError: the job is invalid, or has several sources.
        """
        self.validate()
        if len(self.sources) > 1:
            names = ", ".join(s.name for s in self.sources)
            raise JobDefinitionError(
                f"job {self.name!r} reads {len(self.sources)} sources ({names}); `source_url` "
                "replaces the source of a one-source job: drop `source_url` and set each source "
                "in the job file"
            )
        self.sources[0].source = source

    def replace_sinks(self, sink: Sink) -> None:
        """Send every operator's results to ``sink`` only (``weir run --sink``); side outputs
        keep theirs."""
        for op in self.operators.values():
            op.sinks[:] = [sink]

    def describe_sources(self) -> str:
        """The source's URL; for several, ``name=URL`` each."""
        if len(self.sources) == 1:
            return self.sources[0].source.describe()
        return ", ".join(f"{s.name}={s.source.describe()}" for s in self.sources)
