"""How many events a pattern takes and how they may be spaced (Flink's ``Quantifier``).

Every pattern has a *consuming strategy*, the contiguity to the pattern before it:

- ``STRICT`` (``next``): the event must follow the previous match event directly;
- ``SKIP_TILL_NEXT`` (``followed_by``): events that do not match are skipped, the first one
  that does is taken;
- ``SKIP_TILL_ANY`` (``followed_by_any``): any later matching event may be taken, each choice
  a branch of its own;
- ``NOT_NEXT`` and ``NOT_FOLLOW`` (``not_next``, ``not_followed_by``): no event matching the
  pattern may come next, or at all before the following pattern's event.

A looping (``one_or_more``, ``times_or_more``) or times (``times``) pattern also has an *inner*
strategy between its own events: relaxed by default, ``consecutive()`` makes it strict,
``allow_combinations()`` non-deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from weir.base.errors import MalformedPatternError


class ConsumingStrategy(Enum):
    STRICT = "strict"
    SKIP_TILL_NEXT = "skip_till_next"
    SKIP_TILL_ANY = "skip_till_any"
    NOT_FOLLOW = "not_follow"
    NOT_NEXT = "not_next"


class Property(Enum):
    SINGLE = "single"
    LOOPING = "looping"
    TIMES = "times"
    OPTIONAL = "optional"
    GREEDY = "greedy"


NOT = (ConsumingStrategy.NOT_FOLLOW, ConsumingStrategy.NOT_NEXT)


class WithinType(Enum):
    """What ``within(ms, within_type)`` bounds (Flink's ``WithinType``): the time from a
    match's first event to its last (``FIRST_AND_LAST``, the default), or from the previous
    event a partial match took to the one this pattern takes (``PREVIOUS_AND_CURRENT``)."""

    FIRST_AND_LAST = "first_and_last"
    PREVIOUS_AND_CURRENT = "previous_and_current"


class Quantifier:
    """A pattern's kind (single, looping, times), its options (optional, greedy) and its
    consuming strategies. Built by the pattern's methods, which check the combinations Flink
    allows and name the one that is not."""

    def __init__(self, strategy: ConsumingStrategy, kind: Property = Property.SINGLE) -> None:
        self.properties = {kind}
        self.strategy = strategy
        self.inner = ConsumingStrategy.SKIP_TILL_NEXT

    def has(self, prop: Property) -> bool:
        return prop in self.properties

    @property
    def kind(self) -> Property:
        """``SINGLE``, ``LOOPING`` or ``TIMES``."""
        for prop in (Property.LOOPING, Property.TIMES):
            if prop in self.properties:
                return prop
        return Property.SINGLE

    def combinations(self) -> None:
        _check(
            not self.has(Property.SINGLE),
            "allow_combinations() applies to a looping or "
            "times pattern (one_or_more, times, times_or_more); this one takes one event",
        )
        _check(
            self.inner != ConsumingStrategy.STRICT,
            "allow_combinations() and consecutive() exclude each other; apply one",
        )
        _check(
            self.inner != ConsumingStrategy.SKIP_TILL_ANY, "allow_combinations() is applied already"
        )
        self.inner = ConsumingStrategy.SKIP_TILL_ANY

    def consecutive(self) -> None:
        _check(
            self.has(Property.LOOPING) or self.has(Property.TIMES),
            "consecutive() applies to a looping or times pattern (one_or_more, times, "
            "times_or_more); this one takes one event",
        )
        _check(
            self.inner != ConsumingStrategy.SKIP_TILL_ANY,
            "allow_combinations() and consecutive() exclude each other; apply one",
        )
        _check(self.inner != ConsumingStrategy.STRICT, "consecutive() is applied already")
        self.inner = ConsumingStrategy.STRICT

    def optional(self) -> None:
        _check(not self.has(Property.OPTIONAL), "optional() is applied already")
        _check(
            self.strategy not in NOT, "a NOT pattern (not_next, not_followed_by) cannot be optional"
        )
        self.properties.add(Property.OPTIONAL)

    def greedy(self) -> None:
        _check(
            self.inner != ConsumingStrategy.SKIP_TILL_ANY,
            "greedy() does not apply to a pattern with allow_combinations()",
        )
        _check(
            not self.has(Property.SINGLE),
            "greedy() applies to a looping or times "
            "pattern (one_or_more, times, times_or_more); this one takes one event",
        )
        self.properties.add(Property.GREEDY)

    def describe(self) -> str:
        """``one``, ``looping``, ``times``, with ``optional``/``greedy`` and the strategies."""
        parts = [self.kind.value]
        parts += [p.value for p in (Property.OPTIONAL, Property.GREEDY) if self.has(p)]
        if not self.has(Property.SINGLE):
            parts.append(f"inner={self.inner.value}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Times:
    """How many events a times or looping pattern takes: ``low..high`` (a looping pattern's
    ``high`` is its ``low``: the loop takes the rest), and ``window_ms``, the longest time
    between two of its events (Flink's ``Times.windowTime``; ``None``: no bound)."""

    low: int
    high: int
    window_ms: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if type(value) is not int:
                raise MalformedPatternError(f"times {name}={value!r}: pass an integer")
        if self.low < 1:
            raise MalformedPatternError(
                f"times({self.low}, ...): the count must be 1 or more (times(0, n) is "
                "times(1, n).optional())"
            )
        if self.high < self.low:
            raise MalformedPatternError(
                f"times({self.low}, {self.high}): the upper count is below the lower one; "
                f"pass times({self.high}, {self.low})"
            )
        check_window("window_ms", self.window_ms, none_ok=True)


def check_window(what: str, ms: object, *, none_ok: bool = False) -> None:
    """A window is a positive number of milliseconds (``None`` too, where ``none_ok``).

    Raises:
        MalformedPatternError: anything else.
    """
    if ms is None and none_ok:
        return
    if type(ms) is not int or ms <= 0:
        raise MalformedPatternError(f"{what}={ms!r}: pass a positive number of milliseconds")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MalformedPatternError(message)
