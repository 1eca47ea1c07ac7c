"""The pattern API, after Flink CEP's ``Pattern``: a sequence of named patterns, each with a
condition, a quantifier and a contiguity to the one before::

    from weir.cep import Pattern

    pattern = (
        Pattern.begin("start").where(lambda e: e["name"] == "c")
        .followed_by("middle").where(lambda e: e["name"] == "a").one_or_more().consecutive()
        .followed_by("end1").where(lambda e: e["name"] == "b")
    )

As in Flink a pattern is a builder: ``where``, the quantifiers and ``within`` change the
pattern they are called on and return it; ``next``, ``followed_by``, ``followed_by_any``,
``not_next`` and ``not_followed_by`` return a new pattern whose ``previous`` is this one. A
group pattern (``Pattern.begin(pattern)``, ``followed_by(pattern)``, ...) treats a whole
sequence as one step, which quantifiers then repeat.

``compiler.py`` turns the last pattern of a sequence into the NFA's states.
"""

from __future__ import annotations

from typing import Any, overload

from weir.base.errors import MalformedPatternError
from weir.engine.cep.conditions import Test, always, as_test, both, either, subtype
from weir.engine.cep.quantifier import (
    NOT,
    ConsumingStrategy,
    Property,
    Quantifier,
    Times,
    WithinType,
    check_window,
)
from weir.engine.cep.skip import AfterMatchSkipStrategy

RESERVED = "$endState$"  # the final state's name (Flink's ENDING_STATE_NAME)


def check_pattern_name(name: object) -> str:
    """A pattern's name: any non-empty text without ``:`` (the NFA's state names append
    ``:n`` to it), and not the final state's."""
    if not isinstance(name, str) or not name or ":" in name or name == RESERVED:
        raise MalformedPatternError(
            f"pattern name {name!r} is not allowed; use a non-empty name without ':' "
            f"(and not {RESERVED!r})"
        )
    return name


class Pattern:
    """One named step of a pattern sequence; ``begin`` starts a sequence."""

    def __init__(
        self,
        name: str,
        previous: Pattern | None,
        strategy: ConsumingStrategy,
        skip: AfterMatchSkipStrategy,
    ) -> None:
        self.name = name
        self.previous = previous
        self.quantifier = Quantifier(strategy)
        self.skip = skip
        self.condition: Test = always
        self.shown: list[str] = []  # the condition's parts, for weir explain
        self.until_condition: Test | None = None
        self.count: Times | None = None
        self.window_ms: int | None = None  # WithinType.FIRST_AND_LAST
        self.previous_window_ms: int | None = None  # WithinType.PREVIOUS_AND_CURRENT

    # -- starting a sequence ---------------------------------------------------------------------

    @overload
    @staticmethod
    def begin(name: str, skip: AfterMatchSkipStrategy | None = None) -> Pattern: ...

    @overload
    @staticmethod
    def begin(name: Pattern, skip: AfterMatchSkipStrategy | None = None) -> GroupPattern: ...

    @staticmethod
    def begin(name: str | Pattern, skip: AfterMatchSkipStrategy | None = None) -> Pattern:
        """A new sequence starting with pattern ``name`` (or with a group: a whole sequence as
        its first step); ``skip`` is its after-match skip strategy (default ``no_skip``)."""
        strategy = _skip(skip)
        if isinstance(name, Pattern):
            return GroupPattern(None, name, ConsumingStrategy.STRICT, strategy)
        return Pattern(check_pattern_name(name), None, ConsumingStrategy.STRICT, strategy)

    # -- conditions ------------------------------------------------------------------------------

    def where(self, condition: Any) -> Pattern:
        """Events must also satisfy ``condition``: ``fn(event)`` or ``fn(event, ctx)`` (``ctx``
        has ``events_of(name)``, the partial match's events of a pattern, and ``timestamp``)."""
        test = as_test("where", condition)
        self.condition = both(self.condition, test)
        self.shown.append(("and " if self.shown else "") + _shown(condition))
        return self

    def or_(self, condition: Any) -> Pattern:
        """Events may satisfy ``condition`` instead of the conditions so far (Flink's ``or``)."""
        test = as_test("or_", condition)
        self.condition = test if not self.shown else either(self.condition, test)
        self.shown.append(("or " if self.shown else "") + _shown(condition))
        return self

    def subtype(self, cls: type) -> Pattern:
        """Events must be instances of ``cls`` (Flink's ``subtype``)."""
        if not isinstance(cls, type):
            raise MalformedPatternError(f"subtype({cls!r}): pass a class")
        self.condition = both(self.condition, subtype(cls))
        self.shown.append(("and " if self.shown else "") + f"isinstance({cls.__qualname__})")
        return self

    def until(self, condition: Any) -> Pattern:
        """A looping pattern stops taking events at the first event satisfying ``condition``
        (which it does not take)."""
        if self.until_condition is not None:
            raise MalformedPatternError(f"until(...) on {self.name!r}: apply one until condition")
        if not self.quantifier.has(Property.LOOPING):
            raise MalformedPatternError(
                f"until(...) on {self.name!r}: the until condition applies to looping patterns "
                "(one_or_more, times_or_more); apply the quantifier first"
            )
        self.until_condition = as_test("until", condition)
        return self

    def within(self, ms: int, within_type: WithinType = WithinType.FIRST_AND_LAST) -> Pattern:
        """A match must complete within ``ms`` of its first event (its last event's time minus
        its first's below ``ms``); a partial match older than that times out. Several
        ``within`` in a sequence: the smallest applies. With
        ``WithinType.PREVIOUS_AND_CURRENT``: this pattern's event must come within ``ms`` of
        the event the partial match took before it (Flink's ``within(time, withinType)``; a
        times or looping pattern takes its bound from ``window_ms=`` instead).

        Raises:
            MalformedPatternError: ``ms`` is not a positive integer, or ``within_type`` is not
                a ``WithinType``.
        """
        check_window("within ms", ms)
        if within_type is WithinType.PREVIOUS_AND_CURRENT:
            self.previous_window_ms = ms
        elif within_type is WithinType.FIRST_AND_LAST:
            self.window_ms = ms
        else:
            raise MalformedPatternError(
                f"within({ms}, {within_type!r}): pass WithinType.FIRST_AND_LAST or "
                "WithinType.PREVIOUS_AND_CURRENT"
            )
        return self

    # -- the next pattern ------------------------------------------------------------------------

    @overload
    def next(self, name: str) -> Pattern: ...

    @overload
    def next(self, name: Pattern) -> GroupPattern: ...

    def next(self, name: str | Pattern) -> Pattern:
        """Strict contiguity: the next pattern's event follows this one's directly."""
        return self._then(name, ConsumingStrategy.STRICT)

    @overload
    def followed_by(self, name: str) -> Pattern: ...

    @overload
    def followed_by(self, name: Pattern) -> GroupPattern: ...

    def followed_by(self, name: str | Pattern) -> Pattern:
        """Relaxed contiguity: events that do not match are skipped; the first that does is
        taken."""
        return self._then(name, ConsumingStrategy.SKIP_TILL_NEXT)

    @overload
    def followed_by_any(self, name: str) -> Pattern: ...

    @overload
    def followed_by_any(self, name: Pattern) -> GroupPattern: ...

    def followed_by_any(self, name: str | Pattern) -> Pattern:
        """Non-deterministic relaxed contiguity: any later matching event, each a branch."""
        return self._then(name, ConsumingStrategy.SKIP_TILL_ANY)

    def not_next(self, name: str) -> Pattern:
        """No event matching pattern ``name`` may directly follow this one's."""
        self._check_not_after_optional("not_next")
        return Pattern(check_pattern_name(name), self, ConsumingStrategy.NOT_NEXT, self.skip)

    def not_followed_by(self, name: str) -> Pattern:
        """No event matching pattern ``name`` may come between this one's and the next
        pattern's (at the end of a sequence: within its ``within``)."""
        self._check_not_after_optional("not_followed_by")
        return Pattern(check_pattern_name(name), self, ConsumingStrategy.NOT_FOLLOW, self.skip)

    def _then(self, name: str | Pattern, strategy: ConsumingStrategy) -> Pattern:
        if isinstance(name, Pattern):
            return GroupPattern(self, name, strategy, self.skip)
        return Pattern(check_pattern_name(name), self, strategy, self.skip)

    def _check_not_after_optional(self, what: str) -> None:
        if self.quantifier.has(Property.OPTIONAL):
            raise MalformedPatternError(
                f"{what}(...) after optional pattern {self.name!r}: an optional path to a NOT "
                "pattern is not supported; write two patterns, one with and one without the "
                "optional part"
            )

    # -- quantifiers -----------------------------------------------------------------------------

    def optional(self) -> Pattern:
        """The pattern may take no event."""
        if self.previous is not None and self.previous.quantifier.has(Property.GREEDY):
            raise MalformedPatternError(
                f"optional() on {self.name!r}: an optional pattern cannot follow a greedy one "
                f"({self.previous.name!r})"
            )
        self.quantifier.optional()
        return self

    def one_or_more(self, *, window_ms: int | None = None) -> Pattern:
        """One event or more (a looping pattern); ``window_ms``: see ``times_or_more``."""
        return self.times_or_more(1, window_ms=window_ms)

    def times_or_more(self, n: int, *, window_ms: int | None = None) -> Pattern:
        """``n`` events or more (a looping pattern); ``window_ms`` bounds the time between two
        of its events up to the ``n``-th, as Flink's ``timesOrMore(n, windowTime)`` does."""
        self._quantify("times_or_more")
        self.count = Times(n, n, window_ms)
        self.quantifier = _requantified(self.quantifier, Property.LOOPING)
        return self

    def times(self, low: int, high: int | None = None, *, window_ms: int | None = None) -> Pattern:
        """Exactly ``low`` events, or from ``low`` to ``high`` (``times(0, n)``: up to ``n``,
        optional); ``window_ms`` bounds the time between two of its events (Flink's
        ``times(n, windowTime)``)."""
        self._quantify("times")
        optional = False
        if high is not None and low == 0:
            optional, low = True, 1
        self.count = Times(low, low if high is None else high, window_ms)
        self.quantifier = _requantified(self.quantifier, Property.TIMES)
        if optional:
            self.quantifier.optional()
        return self

    def greedy(self) -> Pattern:
        """A looping or times pattern takes as many events as it can before the next pattern
        may take one."""
        self._check_not_not("greedy")
        if isinstance(self, GroupPattern):
            raise MalformedPatternError("greedy() does not apply to a group pattern")
        self.quantifier.greedy()
        return self

    def consecutive(self) -> Pattern:
        """A looping or times pattern's events follow each other directly."""
        self.quantifier.consecutive()
        return self

    def allow_combinations(self) -> Pattern:
        """A looping or times pattern may take any combination of its matching events."""
        self.quantifier.combinations()
        return self

    def _quantify(self, what: str) -> None:
        self._check_not_not(what)
        if not self.quantifier.has(Property.SINGLE):
            raise MalformedPatternError(
                f"{what}(...) on {self.name!r}: a quantifier is applied already "
                f"({self.quantifier.describe()}); apply one"
            )

    def _check_not_not(self, what: str) -> None:
        if self.quantifier.strategy in NOT:
            raise MalformedPatternError(
                f"{what}(...) on NOT pattern {self.name!r}: a NOT pattern takes no quantifier"
            )

    # -- reading it ------------------------------------------------------------------------------

    def sequence(self) -> list[Pattern]:
        """The sequence's patterns, first to last (this one last)."""
        found: list[Pattern] = []
        p: Pattern | None = self
        while p is not None:
            found.append(p)
            p = p.previous
        return found[::-1]

    def names(self) -> list[str]:
        """Every pattern name in the sequence, groups' inner names included, in order."""
        out: list[str] = []
        for p in self.sequence():
            out += p.inner.names() if isinstance(p, GroupPattern) else [p.name]
        return out

    def describe(self) -> list[dict[str, Any]]:
        """The sequence as data, for ``weir explain``."""
        return [p._describe_one() for p in self.sequence()]

    def _describe_one(self) -> dict[str, Any]:
        step = "begin" if self.previous is None else _METHOD[self.quantifier.strategy]
        out: dict[str, Any] = {"name": self.name, "contiguity": step}
        if isinstance(self, GroupPattern):
            out["group"] = self.inner.describe()
        else:
            out["where"] = " ".join(self.shown) or "true"
        out["quantifier"] = self.quantifier.describe()
        if self.count is not None:
            high = "*" if self.quantifier.has(Property.LOOPING) else self.count.high
            out["times"] = f"{self.count.low}..{high}"
            if self.count.window_ms is not None:
                out["times_window_ms"] = self.count.window_ms
        if self.until_condition is not None:
            out["until"] = self.until_condition.__qualname__
        if self.window_ms is not None:
            out["within_ms"] = self.window_ms
        if self.previous_window_ms is not None:
            out["within_previous_ms"] = self.previous_window_ms
        return out

    def __repr__(self) -> str:
        return f"Pattern({' -> '.join(self.names())})"


class GroupPattern(Pattern):
    """A whole pattern sequence as one step of another (Flink's ``GroupPattern``)."""

    def __init__(
        self,
        previous: Pattern | None,
        inner: Pattern,
        strategy: ConsumingStrategy,
        skip: AfterMatchSkipStrategy,
    ) -> None:
        if not isinstance(inner, Pattern):
            raise MalformedPatternError(f"group pattern of {inner!r}: pass a Pattern")
        super().__init__(f"group({inner.names()[0]}..{inner.names()[-1]})", previous, strategy,
                         skip)  # fmt: skip
        self.inner = inner

    def where(self, condition: Any) -> Pattern:
        """Refused: a condition belongs to the steps inside the group.

        Raises:
            MalformedPatternError: always.
        """
        raise MalformedPatternError("where(...) does not apply to a group pattern")

    def or_(self, condition: Any) -> Pattern:
        """Refused: a condition belongs to the steps inside the group.

        Raises:
            MalformedPatternError: always.
        """
        raise MalformedPatternError("or_(...) does not apply to a group pattern")

    def until(self, condition: Any) -> Pattern:
        """Refused: a condition belongs to the steps inside the group.

        Raises:
            MalformedPatternError: always.
        """
        raise MalformedPatternError("until(...) does not apply to a group pattern")

    def subtype(self, cls: type) -> Pattern:
        """Refused: a condition belongs to the steps inside the group.

        Raises:
            MalformedPatternError: always.
        """
        raise MalformedPatternError("subtype(...) does not apply to a group pattern")


_METHOD = {  # how a step is shown: the method that made it
    ConsumingStrategy.STRICT: "next",
    ConsumingStrategy.SKIP_TILL_NEXT: "followed_by",
    ConsumingStrategy.SKIP_TILL_ANY: "followed_by_any",
    ConsumingStrategy.NOT_NEXT: "not_next",
    ConsumingStrategy.NOT_FOLLOW: "not_followed_by",
}


def _requantified(old: Quantifier, kind: Property) -> Quantifier:
    """A looping or times quantifier in place of a single one; ``optional()`` applied before
    stays (Flink's builder drops it)."""
    fresh = Quantifier(old.strategy, kind)
    if old.has(Property.OPTIONAL):
        fresh.optional()
    return fresh


def _skip(skip: object) -> AfterMatchSkipStrategy:
    if skip is None:
        return AfterMatchSkipStrategy.no_skip()
    if not isinstance(skip, AfterMatchSkipStrategy):
        raise MalformedPatternError(
            f"skip={skip!r}: pass an AfterMatchSkipStrategy, e.g. "
            "AfterMatchSkipStrategy.skip_past_last_event()"
        )
    return skip


def _shown(condition: object) -> str:
    return str(getattr(condition, "__qualname__", None) or type(condition).__qualname__)
