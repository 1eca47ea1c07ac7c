"""After-match skip strategies (Flink's ``AfterMatchSkipStrategy``): once a match is emitted,
which partial matches (and completed matches not yet emitted) are dropped.

- ``no_skip()``: none; every match is emitted.
- ``skip_to_next()``: those that started with the match's first event (or before it).
- ``skip_past_last_event()``: those that started at or before the match's last event.
- ``skip_to_first(name)``: those that started before the first event of ``name`` in the match.
- ``skip_to_last(name)``: those that started before the last event of ``name`` in the match.

With a strategy other than ``no_skip``, a completed match waits until no partial match that
started earlier is alive, so matches are emitted in the order of their first events and each
one prunes the ones after it (Flink's ``NFA.processMatchesAccordingToSkipStrategy``).

Events are compared by ``EventId`` ``(timestamp, n)``: the n-th event of its timestamp.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from weir.base.errors import MalformedPatternError, WeirError

EventId = tuple[int, int]  # (timestamp, the event's number among its timestamp's)
PathIds = dict[str, list[EventId]]  # pattern name -> the event ids it took, oldest first

Kind = Literal["no_skip", "skip_to_next", "skip_past_last_event", "skip_to_first", "skip_to_last"]


class SkipError(WeirError):
    """A match that ``skip_to_first``/``skip_to_last(...).throw_on_miss()`` cannot skip in: the
    named pattern took no event, or it took the match's first (the skip would loop)."""


@dataclass(frozen=True, slots=True)
class AfterMatchSkipStrategy:
    """One of the five strategies; build it with the class's functions, e.g.
    ``AfterMatchSkipStrategy.skip_past_last_event()``."""

    kind: Kind = "no_skip"
    pattern: str | None = None  # skip_to_first / skip_to_last: the pattern named
    throw_on_miss: bool = False

    @staticmethod
    def no_skip() -> AfterMatchSkipStrategy:
        """Emit every match; drop no partial match (Flink's default).

        Example:
            >>> AfterMatchSkipStrategy.no_skip().kind
            'no_skip'
        """
        return AfterMatchSkipStrategy("no_skip")

    @staticmethod
    def skip_to_next() -> AfterMatchSkipStrategy:
        """Drop the partial matches that started with the match's first event (or before it).

        Example:
            >>> AfterMatchSkipStrategy.skip_to_next().kind
            'skip_to_next'
        """
        return AfterMatchSkipStrategy("skip_to_next")

    @staticmethod
    def skip_past_last_event() -> AfterMatchSkipStrategy:
        """Drop the partial matches that started at or before the match's last event: matches
        never overlap.

        Example:
            >>> AfterMatchSkipStrategy.skip_past_last_event().kind
            'skip_past_last_event'
        """
        return AfterMatchSkipStrategy("skip_past_last_event")

    @staticmethod
    def skip_to_first(name: str) -> AfterMatchSkipStrategy:
        """Drop the partial matches that started before the first event the pattern ``name``
        took in the match.

        Args:
            name: a pattern step's name.

        Raises:
            MalformedPatternError: ``name`` is empty.

        Example:
            >>> AfterMatchSkipStrategy.skip_to_first("b").pattern
            'b'
        """
        return AfterMatchSkipStrategy("skip_to_first", _named("skip_to_first", name))

    @staticmethod
    def skip_to_last(name: str) -> AfterMatchSkipStrategy:
        """Drop the partial matches that started before the last event the pattern ``name``
        took in the match.

        Args:
            name: a pattern step's name.

        Raises:
            MalformedPatternError: ``name`` is empty.

        Example:
            >>> AfterMatchSkipStrategy.skip_to_last("b").pattern
            'b'
        """
        return AfterMatchSkipStrategy("skip_to_last", _named("skip_to_last", name))

    def throw_exception_on_miss(self) -> AfterMatchSkipStrategy:
        """``skip_to_first``/``skip_to_last``: a match in which the named pattern took no event
        (or whose first event it is) fails with ``SkipError`` instead of skipping nothing."""
        if self.pattern is None:
            raise MalformedPatternError(
                f"throw_exception_on_miss() applies to skip_to_first/skip_to_last, not {self.kind}"
            )
        return AfterMatchSkipStrategy(self.kind, self.pattern, True)

    @property
    def is_skip(self) -> bool:
        """Does it prune (every strategy but ``no_skip``)?"""
        return self.kind != "no_skip"

    def pruning_id(self, paths: list[PathIds]) -> EventId | None:
        """The event that decides what a match (its paths: one) prunes; ``None``: nothing."""
        found: list[EventId] = []
        for match in paths:
            one = self._pruning_id(match)
            if one is not None:
                found.append(one)
        if not found:
            return None
        return min(found) if self.kind == "skip_to_next" else max(found)

    def _pruning_id(self, match: PathIds) -> EventId | None:
        if self.kind == "no_skip":
            return None
        if self.kind == "skip_to_next":
            return min(ids[0] for ids in match.values())
        if self.kind == "skip_past_last_event":
            return max(ids[-1] for ids in match.values())
        taken = match.get(self.pattern or "")
        if not taken:
            if self.throw_on_miss:
                raise SkipError(
                    f"cannot skip to {self.pattern!r}: the match took no event for it "
                    f"({sorted(match)}); drop throw_exception_on_miss() to skip nothing"
                )
            return None
        found = taken[0] if self.kind == "skip_to_first" else taken[-1]
        if self.throw_on_miss and found == min(ids[0] for ids in match.values()):
            raise SkipError(
                f"cannot skip to {self.kind.removeprefix('skip_to_')} {self.pattern!r}: it is "
                "the match's first event, and skipping to it would find the same match again"
            )
        return found

    def prunes(self, start: EventId | None, pruning: EventId) -> bool:
        """Is a partial match that started with event ``start`` dropped?"""
        if start is None:
            return False
        if self.kind in ("skip_to_next", "skip_past_last_event"):
            return start <= pruning
        return start < pruning

    def describe(self) -> str:
        """How ``weir explain`` shows the strategy: ``skip_to_first(b)``."""
        return self.kind if self.pattern is None else f"{self.kind}({self.pattern})"


def _named(where: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise MalformedPatternError(f"{where}({name!r}): pass the name of a pattern")
    return name


def check_names(strategy: AfterMatchSkipStrategy, names: Iterable[str]) -> None:
    """The pattern a skip strategy names must be one of the sequence's."""
    if strategy.pattern is not None and strategy.pattern not in set(names):
        raise MalformedPatternError(
            f"{strategy.describe()} names pattern {strategy.pattern!r}, which the pattern "
            f"sequence does not have ({', '.join(sorted(names))})"
        )
