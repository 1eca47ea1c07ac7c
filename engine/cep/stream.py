"""The pattern stream's builder: ``keyed.pattern(p).select(fn, name=...)`` or
``.process(fn, name=...)``, each ending in a keyed process function (``function.py``), as
Flink's ``CEP.pattern(keyed, p).select(...)`` ends in a ``CepOperator``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.base.errors import JobDefinitionError, MalformedPatternError
from weir.engine.cep.compiler import can_produce_empty_matches, compile_pattern
from weir.engine.cep.function import LATE, TIMED_OUT, MatchContext, MatchFn, PatternFunction
from weir.engine.cep.pattern import Pattern
from weir.engine.nodes import ProcessNode
from weir.engine.streams import KeyedStream

if TYPE_CHECKING:
    from weir.engine.job import Job
    from weir.engine.results import ResultStream

Match = dict[str, list[Any]]


def pattern(self: KeyedStream, pattern: Pattern) -> PatternStream:
    """The matches of ``pattern`` in each key's events, in event time (Flink's
    ``CEP.pattern(keyed, pattern)``): ``.select(fn=None, *, name=...)`` or
    ``.process(fn, *, name=...)`` (``weir.engine.cep``)."""
    if not isinstance(pattern, Pattern):
        raise MalformedPatternError(
            f"pattern({pattern!r}): pass a Pattern, e.g. Pattern.begin('a').where(...)"
        )
    compile_pattern(pattern)  # a malformed pattern fails where the job is defined
    if can_produce_empty_matches(pattern):
        raise MalformedPatternError(
            f"{pattern!r} can match no event at all (every pattern of it is optional); make "
            "one of its patterns required"
        )
    return PatternStream(self, pattern)


class PatternStream:
    """A keyed stream and a pattern, waiting for what to do with each match."""

    def __init__(self, keyed: KeyedStream, pattern: Pattern) -> None:
        self._keyed = keyed
        self.pattern = pattern

    def select(self, fn: Callable[[Match], Any] | None = None, *, name: str) -> ResultStream:
        """One record per match: ``fn(match)`` (``match``: the events by pattern name, oldest
        first), or with no function ``{"key", "match", "ts"}`` (``ts``: the match's time, its
        last event's, or the watermark that released it)."""
        if fn is None:
            return self._operator(None, name)
        if not callable(fn):
            raise JobDefinitionError(f"select({fn!r}): pass a function fn(match) -> record")
        select = fn

        def emit(match: Match, ctx: MatchContext) -> None:
            ctx.emit(select(match))

        emit.__qualname__ = getattr(fn, "__qualname__", "select")
        return self._operator(emit, name)

    def process(self, fn: MatchFn, *, name: str) -> ResultStream:
        """``fn(match, ctx)`` per match, which emits what it likes with ``ctx.emit(record)``
        (or ``ctx.output(tag, record)``); ``ctx`` also has ``key`` and ``timestamp`` (Flink's
        ``PatternProcessFunction``)."""
        if not callable(fn):
            raise JobDefinitionError(f"process({fn!r}): pass a function fn(match, ctx)")
        return self._operator(fn, name)

    def _operator(self, fn: MatchFn | None, name: str) -> ResultStream:
        result = self._keyed.process(PatternFunction(self.pattern, fn), name=name)
        op = result.operator
        if isinstance(op, ProcessNode):  # always: KeyedStream.process makes one
            op.side_outputs.setdefault(LATE.name, [])
            op.side_outputs.setdefault(TIMED_OUT.name, [])
        return result


def patterns_of(job: Job) -> list[str]:
    """The names of the job's pattern operators."""
    return [
        op.name
        for op in job.operators.values()
        if isinstance(op, ProcessNode) and isinstance(op.function, PatternFunction)
    ]
