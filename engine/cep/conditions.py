"""A pattern's conditions (Flink's ``IterativeCondition`` and ``SimpleCondition``): what an
event must satisfy to be taken by a pattern.

A condition is a function of the event, ``fn(event) -> bool``, or of the event and the partial
match it would extend, ``fn(event, ctx) -> bool``, where ``ctx.events_of(name)`` lists the
events the match so far took for pattern ``name`` and ``ctx.timestamp`` is the event's time
(an *iterative* condition). Which of the two a function is, is read from its signature once,
when the pattern is built: one positional parameter, or two.

Compiled, every condition is a ``Test``: ``test(event, ctx) -> bool``. The NFA combines them
(``both``, ``either``, ``negate``) as Flink's ``RichAndCondition``, ``RichOrCondition`` and
``RichNotCondition`` do; ``always`` is Flink's ``trueFunction``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

from weir.base.errors import MalformedPatternError


class ConditionContext(Protocol):
    """What an iterative condition sees besides the event."""

    @property
    def timestamp(self) -> int:
        """The event's time (epoch ms)."""
        ...

    def events_of(self, name: str) -> list[Any]:
        """The events the partial match took for pattern ``name``, oldest first."""
        ...


Test = Callable[[Any, ConditionContext], bool]


def as_test(where: str, fn: object) -> Test:
    """``fn`` as a ``Test``: a one-argument function is wrapped, a two-argument one is used as
    it is.

    Raises:
        MalformedPatternError: ``fn`` is not a function of one or two positional parameters.
    """
    if not callable(fn):
        raise MalformedPatternError(
            f"{where}({fn!r}): pass a function fn(event) -> bool, or fn(event, ctx) -> bool "
            "for a condition on the partial match"
        )
    arity = _arity(fn)
    if arity == 1:
        simple: Callable[[Any], Any] = fn

        def test(event: Any, ctx: ConditionContext) -> bool:
            return bool(simple(event))

        test.__qualname__ = _qualname(fn)
        return test
    if arity == 2:
        iterative: Callable[[Any, ConditionContext], Any] = fn

        def test2(event: Any, ctx: ConditionContext) -> bool:
            return bool(iterative(event, ctx))

        test2.__qualname__ = _qualname(fn)
        return test2
    raise MalformedPatternError(
        f"{where}({_qualname(fn)}): a condition takes the event, fn(event), or the event and "
        f"the partial match, fn(event, ctx); this one takes {arity} positional parameters"
    )


def _arity(fn: Callable[..., Any]) -> int:
    """How many positional parameters ``fn`` takes (``*args``: counted as two)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: a function of one value
        return 1
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return max(len(positional), 2)
    return len(positional)


def _qualname(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def name_of(test: Test) -> str:
    """How a condition is shown (``weir explain``): its function's name."""
    return _qualname(test)


def always(event: Any, ctx: ConditionContext) -> bool:
    """The condition every event satisfies (Flink's ``BooleanConditions.trueFunction``); the
    NFA recognises it and calls nothing."""
    return True


def never(event: Any, ctx: ConditionContext) -> bool:
    """The condition no event satisfies."""
    return False


def both(first: Test, second: Test) -> Test:
    """``first and second``."""
    if first is always:
        return second
    if second is always:
        return first
    a, b = first, second

    def test(event: Any, ctx: ConditionContext) -> bool:
        return a(event, ctx) and b(event, ctx)

    test.__qualname__ = f"({name_of(a)} and {name_of(b)})"
    return test


def either(first: Test, second: Test) -> Test:
    """``first or second``."""
    if first is always or second is always:
        return always
    a, b = first, second

    def test(event: Any, ctx: ConditionContext) -> bool:
        return a(event, ctx) or b(event, ctx)

    test.__qualname__ = f"({name_of(a)} or {name_of(b)})"
    return test


def negate(condition: Test) -> Test:
    """``not condition``."""
    if condition is always:
        return never
    if condition is never:
        return always
    c = condition

    def test(event: Any, ctx: ConditionContext) -> bool:
        return not c(event, ctx)

    test.__qualname__ = f"not {name_of(c)}"
    return test


def subtype(cls: type) -> Test:
    """Events that are instances of ``cls`` (Flink's ``SubtypeCondition``)."""

    def test(event: Any, ctx: ConditionContext) -> bool:
        return isinstance(event, cls)

    test.__qualname__ = f"isinstance({cls.__qualname__})"
    return test
