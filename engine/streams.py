"""The job API's streams: each method records a node of the job's graph (``weir.engine.job``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, overload

from weir.base.errors import JobDefinitionError
from weir.engine.expressions import Expr, to_ir
from weir.engine.expressions import steps as _steps
from weir.engine.sinks import Sink
from weir.engine.windows import (
    CountWindows,
    CumulateWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)

if TYPE_CHECKING:  # types only: the joins library imports this module, never the reverse
    from weir.engine.cep import Pattern, PatternStream
    from weir.engine.job import Job
    from weir.engine.joins import IntervalJoin, JoinedStreams

from weir.engine.connected import (
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedKeyedStreams,
    ConnectedStreams,
)
from weir.engine.nodes import (
    ForwardNode,
    KeyByNode,
    KeySelector,
    Node,
    ProcessNode,
    Record,
    SinkNode,
    StatelessNode,
    WindowCall,
    _check_name,
    _state_names,
)
from weir.engine.results import ResultStream
from weir.engine.windowed import WindowedStream


def _unbound(method: str) -> JobDefinitionError:
    """A library method called before its library bound it: only a program that imports this
    module without ``weir.engine`` (which loads the library at the method's first call) can
    get here."""
    return JobDefinitionError(
        f"{method} is bound by a library of the job API that is not loaded; import weir (or "
        "weir.engine) before building a job"
    )


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

    def step(self, node: StatelessNode) -> DataStream:
        """The stream after ``node``, a stateless step built by a library of the job API (Stream
        SQL's ``WHERE`` and table checks, which carry their SQL and IR beside the function).

        Example:
            >>> from weir import Job, sources
            >>> from weir.engine.kernels import ir
            >>> from weir.engine.nodes import SqlStep, StatelessNode
            >>> where = ir.Cmp("eq", ir.Col("event"), ir.Lit("click"))
            >>> node = StatelessNode("filter", lambda r: r.get("event") == "click", expr=where,
            ...                      sql=SqlStep("WHERE event = 'click'"))
            >>> clicks = Job("j").source(sources.jsonl("events.jsonl")).step(node)
        """
        if not isinstance(node, StatelessNode):
            raise JobDefinitionError(f"step({node!r}): takes a StatelessNode")
        return self._add(node)

    def map(self, fn: Callable[[Record], Any]) -> DataStream:
        """Each record replaced by ``fn(record)``; a record it raises on goes to the dead
        letters (stage ``map``)."""
        return self._add(StatelessNode("map", _callable("map", fn)))

    def filter(self, predicate: Callable[[Record], Any] | Expr) -> DataStream:
        """The records for which ``predicate`` holds: a function of the record (truthy keeps
        it), or an expression (TRUE keeps it; FALSE and NULL drop it; a record it fails on
        goes to the dead letters, the reason naming the expression).

        Example:
            >>> from weir import Job, col, sources
            >>> stream = Job("j").source(sources.jsonl("events.jsonl"))
            >>> clicks = stream.filter(col("event") == "click")
        """
        if isinstance(predicate, Expr):
            node = predicate.ir
            return self._add(StatelessNode("filter", _steps.predicate(node), expr=node))
        return self._add(StatelessNode("filter", _callable("filter", predicate)))

    def flat_map(self, fn: Callable[[Record], Iterable[Any]]) -> DataStream:
        """Each record replaced by the records ``fn(record)`` yields (none, one or many); a
        record it raises on goes to the dead letters (stage ``flat_map``)."""
        return self._add(StatelessNode("flat_map", _callable("flat_map", fn)))

    def with_columns(self, *exprs: Expr, **named: Any) -> DataStream:
        """Each record with fields added or replaced by expressions, all evaluated on the
        record as it comes in (as Polars' ``with_columns``): ``name=expr`` (a Python value
        is a literal), or an expression named by its ``alias`` (else by its first column).
        A record an expression fails on goes to the dead letters; a NULL value is ``None``.

        Example:
            >>> from weir import Job, col, sources
            >>> stream = Job("j").source(sources.jsonl("events.jsonl"))
            >>> priced = stream.with_columns(total=col("price") * col("qty"), source="web")
        """
        columns: dict[str, Any] = {}
        for e in exprs:
            name = e.output_name if isinstance(e, Expr) else None
            if name is None:
                raise JobDefinitionError(
                    f"with_columns({e!r}): a positional argument must be an expression with a "
                    "name: give it .alias('name'), or pass it as name=expression"
                )
            columns[_new_column(columns, name)] = e.ir
        for name, value in named.items():
            try:
                columns[_new_column(columns, name)] = to_ir(value)
            except TypeError as exc:
                raise JobDefinitionError(f"with_columns({name}=...): {exc}") from None
        if not columns:
            raise JobDefinitionError("with_columns(): pass one or more name=expression")
        fn = _steps.projection(columns)
        return self._add(StatelessNode("with_columns", fn, columns=columns))

    def map_batch(self, fn: Callable[[Any], Any]) -> DataStream:
        """Records replaced batch by batch: ``fn`` gets a batch of columns (a dict of numpy
        arrays, ``weir.engine.batches``) and returns one (a dict of arrays or lists, each as
        long as the batch); output record ``i`` keeps input record ``i``'s event time.

        Example:
            >>> from weir import Job, sources
            >>> stream = Job("j").source(sources.jsonl("events.jsonl"))
            >>> cents = stream.map_batch(lambda b: {**b, "cents": b["value"] * 100})
        """
        return self._add(StatelessNode("map_batch", _callable("map_batch", fn)))

    def filter_batch(self, fn: Callable[[Any], Any]) -> DataStream:
        """The records kept by a function over a batch of columns: ``fn`` gets the batch (a
        dict of numpy arrays, ``weir.engine.batches``) and returns a boolean array as long
        as it; the records where it is true pass on unchanged.

        Example:
            >>> from weir import Job, sources
            >>> stream = Job("j").source(sources.jsonl("events.jsonl"))
            >>> big = stream.filter_batch(lambda b: b["value"] > 100)
        """
        return self._add(StatelessNode("filter_batch", _callable("filter_batch", fn)))

    def key_by(self, key: KeySelector | Expr) -> KeyedStream:
        """Keyed processing by ``key``: a field name, a function of the record, or an
        expression (its value must be a string or an int; NULL sends the record to the dead
        letters). ``key_by(col("id"))`` is ``key_by("id")``.

        Example:
            >>> from weir import Job, col, sources
            >>> stream = Job("j").source(sources.jsonl("events.jsonl"))
            >>> by_user = stream.key_by(col("user").cast(str))
        """
        key_expr = None
        if isinstance(key, Expr):
            key, key_expr = _steps.selector(key, _steps.KEY_NEEDS)
        elif not (isinstance(key, str) and key) and not callable(key):
            raise JobDefinitionError(
                f"key_by({key!r}): pass a field name, a function of the record or an expression"
            )
        node = KeyByNode(key, key_expr=key_expr)
        self._attach(node)
        return KeyedStream(self._job, node)

    def sink(self, sink: Sink) -> DataStream:
        """Write the stream's records to ``sink`` as they pass (e.g. ``sinks.jsonl(path)``;
        file sinks are exactly-once through checkpoints), and return this stream."""
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
        .apply(fn=None, *, name=...)`` pairs the records of one key in one window. The joins
        library (``weir.engine.joins``, loaded by its first call) binds its body."""
        raise _unbound("DataStream.join")


class KeyedStream:
    """A stream partitioned by key (``DataStream.key_by``): window it, or run a process
    function over it. Its operators keep their state per key, in RocksDB by key group, and
    serve it at ``GET /{job}/{operator}/state/{key}``."""

    def __init__(self, job: Job, node: KeyByNode) -> None:
        self._job = job
        self._node = node

    def window(self, assigner: WindowAssigner, allowed_lateness_ms: int = 0) -> WindowedStream:
        """Group each key's records into windows, for an aggregate.

        Args:
            assigner: which windows a record belongs to: ``windows.tumbling``, ``sliding``,
                ``session``, ``dynamic_session``, ``cumulate``, ``count`` or
                ``global_windows``.
            allowed_lateness_ms: how long after a window fires a late record still updates
                it (the window is emitted again); later records go to the late output.

        Returns:
            The windowed stream; ``.aggregate(...)`` names the operator.

        Raises:
            JobDefinitionError: not a window assigner, or a negative lateness.

        Example:
            ``keyed.window(windows.tumbling(ms=60_000), allowed_lateness_ms=5_000)``
        """
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
        call = WindowCall(assigner)
        self._node.windows.append(call)  # until aggregate(): validate() names it if never
        return WindowedStream(self._job, self._node, call, allowed_lateness_ms)

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
        op = ProcessNode(name, self._node.key, fn)
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

    def pattern(self, pattern: Pattern) -> PatternStream:
        """The matches of a CEP pattern in each key's events, in event time (Flink's
        ``CEP.pattern(keyed, pattern)``): ``.select(fn=None, *, name=...)`` or
        ``.process(fn, *, name=...)``. The CEP library (``weir.engine.cep``, loaded by its
        first call) binds its body."""
        raise _unbound("KeyedStream.pattern")

    def interval_join(self, other: KeyedStream) -> IntervalJoin:
        """An interval join (Flink's): ``.between(lower_ms, upper_ms)``, optionally
        ``.lower_bound_exclusive()``/``.upper_bound_exclusive()``, then ``.process(fn=None, *,
        name=...)`` pairs records of one key with ``other.ts - this.ts`` within the bounds. The
        joins library (``weir.engine.joins``, loaded by its first call) binds its body."""
        raise _unbound("KeyedStream.interval_join")


def _new_column(columns: dict[str, Any], name: str) -> str:
    if name in columns:
        raise JobDefinitionError(f"with_columns(): field {name!r} is given twice; name it once")
    return name


def _callable(kind: str, fn: object) -> Callable[[Record], Any]:
    if not callable(fn):
        raise JobDefinitionError(f"{kind}({fn!r}): pass a function of one record")
    return fn
