"""The joins' builders: ``a.join(b)...apply(name=...)`` and ``a.interval_join(b)...process(
name=...)``, each ending in a keyed co-process function of ``window.py`` or ``interval.py``
(``weir.engine.joins`` has the examples)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.base.errors import JobDefinitionError
from weir.engine.joins.buffers import LATE
from weir.engine.joins.interval import IntervalJoinFunction, PairContext
from weir.engine.joins.window import WindowJoinFunction
from weir.engine.nodes import ProcessNode
from weir.engine.streams import KeyedStream
from weir.engine.windows import SessionWindows, SlidingWindows, TumblingWindows

if TYPE_CHECKING:
    from weir.engine.job import Job
    from weir.engine.nodes import KeySelector
    from weir.engine.results import ResultStream
    from weir.engine.streams import DataStream

__all__ = [
    "LATE",
    "IntervalJoin",
    "IntervalJoined",
    "JoinedStreams",
    "PairContext",
    "WindowedJoin",
    "interval_join",
    "join",
    "joins_of",
]


def join(self: DataStream, other: DataStream) -> JoinedStreams:
    """A window join (Flink's): ``.where(key).equal_to(other_key).window(assigner)
    .apply(fn=None, *, name=...)`` pairs the records of one key in one window
    (``weir.engine.joins``)."""
    self._same_job("join", other)
    return JoinedStreams(self, other)


def interval_join(self: KeyedStream, other: KeyedStream) -> IntervalJoin:
    """An interval join (Flink's): ``.between(lower_ms, upper_ms)``, optionally
    ``.lower_bound_exclusive()``/``.upper_bound_exclusive()``, then ``.process(fn=None, *,
    name=...)`` pairs records of one key with ``other.ts - this.ts`` within the bounds
    (``weir.engine.joins``)."""
    if not isinstance(other, KeyedStream) or other._job is not self._job:
        raise JobDefinitionError(
            f"interval_join({other!r}): pass a keyed stream of the same job, e.g. "
            "a.key_by('id').interval_join(b.key_by('id'))"
        )
    return IntervalJoin(self, other)


def _check_key(where: str, key: object) -> None:
    if not (isinstance(key, str) and key) and not callable(key):
        raise JobDefinitionError(f"{where}({key!r}): pass a field name or a function of the record")


def _check_fn(where: str, fn: object, shape: str) -> None:
    if fn is not None and not callable(fn):
        raise JobDefinitionError(f"{where}(fn={fn!r}): pass a function {shape}, or none")


class JoinedStreams:
    """``a.join(b)``: name the key of each side with ``where`` (``a``'s) and ``equal_to``."""

    def __init__(self, left: DataStream, right: DataStream) -> None:
        self._left = left
        self._right = right

    def where(self, key: KeySelector) -> _Where:
        """The left stream's key: a field name or a function of the record.

        Example:
            ``views.join(clicks).where("ad").equal_to("ad_id").window(windows.tumbling(ms=10_000))``
        """
        _check_key("where", key)
        return _Where(self._left, self._right, key)

    def equal_to(self, key: KeySelector) -> _Where:
        """Refused here: name the left key with ``where`` first.

        Raises:
            JobDefinitionError: always, naming the order to call them in.
        """
        raise JobDefinitionError(
            f"join(...).equal_to({key!r}) without where: name the left stream's key first, "
            "e.g. a.join(b).where('id').equal_to('id')"
        )

    def window(self, assigner: object) -> WindowedJoin:
        """Refused here: name both keys first (``where(...).equal_to(...)``).

        Raises:
            JobDefinitionError: always, naming the calls that come first.
        """
        raise JobDefinitionError(
            f"join(...).window({assigner!r}) without keys: call .where(<left key>)"
            ".equal_to(<right key>) before .window(...)"
        )


class _Where:
    def __init__(self, left: DataStream, right: DataStream, key: KeySelector) -> None:
        self._left = left
        self._right = right
        self._key = key

    def equal_to(self, key: KeySelector) -> _Keyed:
        _check_key("equal_to", key)
        return _Keyed(self._left, self._right, self._key, key)

    def window(self, assigner: object) -> WindowedJoin:
        raise JobDefinitionError(
            f"join(...).where({self._key!r}) has no equal_to: call .equal_to(<right stream's "
            "key>) before .window(...)"
        )


class _Keyed:
    def __init__(
        self, left: DataStream, right: DataStream, key: KeySelector, other: KeySelector
    ) -> None:
        self._left = left
        self._right = right
        self._keys = (key, other)

    def window(self, assigner: object) -> WindowedJoin:
        if not isinstance(assigner, TumblingWindows | SlidingWindows | SessionWindows):
            raise JobDefinitionError(
                f"join window({assigner!r}): a window join takes windows.tumbling(ms=...), "
                "windows.sliding(size_ms=..., slide_ms=...) or windows.session(gap_ms=...)"
            )
        if assigner.time != "event":
            raise JobDefinitionError(
                f"join window({assigner!r}) is on processing time; joins run on event time: "
                "drop time='processing'"
            )
        if isinstance(assigner, SlidingWindows) and assigner.gapped:
            raise JobDefinitionError(
                f"join window({assigner!r}) slides further than its size: a window join takes "
                "windows without gaps (slide_ms <= size_ms)"
            )
        return WindowedJoin(self._left, self._right, self._keys, assigner)


class WindowedJoin:
    """``a.join(b).where(..).equal_to(..).window(..)``; ``apply`` names the join."""

    def __init__(
        self,
        left: DataStream,
        right: DataStream,
        keys: tuple[KeySelector, KeySelector],
        assigner: TumblingWindows | SlidingWindows | SessionWindows,
    ) -> None:
        self._left = left
        self._right = right
        self._keys = keys
        self._assigner = assigner

    def apply(self, fn: Callable[[Any, Any], Any] | None = None, *, name: str) -> ResultStream:
        """The queryable join ``name``; ``fn(left, right)`` makes each pair's record (``None``
        from it: no record), else ``{"key", "start", "end", "left", "right"}``."""
        _check_fn("apply", fn, "fn(left, right) returning the joined record")
        function = WindowJoinFunction(self._assigner, fn)
        connected = self._left.connect(self._right).key_by(*self._keys)
        return _with_late_output(connected.process(function, name=name))


class IntervalJoin:
    """``a.key_by(ka).interval_join(b.key_by(kb))``: give the bounds with ``between``."""

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        self._left = left
        self._right = right

    def between(self, lower_ms: int, upper_ms: int) -> IntervalJoined:
        """Join ``left`` and ``right`` when ``lower_ms <= right.ts - left.ts <= upper_ms``."""
        for name, value in (("lower_ms", lower_ms), ("upper_ms", upper_ms)):
            if type(value) is not int:
                raise JobDefinitionError(
                    f"between({lower_ms!r}, {upper_ms!r}): {name} must be an integer of "
                    "milliseconds"
                )
        if lower_ms > upper_ms:
            raise JobDefinitionError(
                f"between({lower_ms}, {upper_ms}): the lower bound is above the upper one; "
                f"pass between({upper_ms}, {lower_ms}) (right.ts - left.ts within the bounds)"
            )
        return IntervalJoined(self._left, self._right, lower_ms, upper_ms)

    def process(self, fn: object = None, *, name: str) -> ResultStream:
        """Refused here: give the bounds with ``between`` first.

        Raises:
            JobDefinitionError: always, naming ``between``.
        """
        raise JobDefinitionError(
            f"interval_join(...).process(name={name!r}) without bounds: call "
            ".between(lower_ms, upper_ms) first"
        )


class IntervalJoined:
    """An interval join with its bounds; ``process`` names it."""

    def __init__(self, left: KeyedStream, right: KeyedStream, lower: int, upper: int) -> None:
        self._left = left
        self._right = right
        self._bounds = (lower, upper)
        self._inclusive = [True, True]

    def lower_bound_exclusive(self) -> IntervalJoined:
        """Exclude the lower bound: ``lower_ms < right.ts - left.ts``."""
        self._inclusive[0] = False
        return self

    def upper_bound_exclusive(self) -> IntervalJoined:
        """Exclude the upper bound: ``right.ts - left.ts < upper_ms``."""
        self._inclusive[1] = False
        return self

    def process(
        self, fn: Callable[[Any, Any, PairContext], None] | None = None, *, name: str
    ) -> ResultStream:
        """The queryable join ``name``; ``fn(left, right, ctx)`` may ``ctx.emit`` records
        (``ctx``: ``key``, ``left_timestamp``, ``right_timestamp``, ``timestamp``, ``emit``,
        ``output``), else each pair is ``{"key", "left", "right", "ts"}``."""
        _check_fn("process", fn, "fn(left, right, ctx) that calls ctx.emit(record)")
        lower, upper = self._bounds
        function = IntervalJoinFunction(
            lower, upper, lower_inclusive=self._inclusive[0],
            upper_inclusive=self._inclusive[1], fn=fn,
        )  # fmt: skip
        return _with_late_output(self._left.connect(self._right).process(function, name=name))


def joins_of(job: Job) -> list[tuple[str, str]]:
    """The job's joins, ``(name, "window join" | "interval join")``."""
    found = []
    for op in job.operators.values():
        if isinstance(op, ProcessNode) and isinstance(op.function, WindowJoinFunction):
            found.append((op.name, "window join"))
        elif isinstance(op, ProcessNode) and isinstance(op.function, IntervalJoinFunction):
            found.append((op.name, "interval join"))
    return found


def _with_late_output(result: ResultStream) -> ResultStream:
    """Declare the join's late output, so late records reach a sink (by default the job's
    ``side-<name>-late.jsonl``) instead of the dead letters."""
    op = result.operator
    if isinstance(op, ProcessNode):  # always: connect makes a co-process operator
        op.side_outputs.setdefault(LATE.name, [])
    return result
