"""Flink CEP's ``GreedyITCase``, ported case by case (the Flink test's name in each test's), on
weir's NFA fed one event at a time (``test_cep_nfa.feed``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_cep_nfa import ev, feed, named, same
from weir.base.errors import MalformedPatternError
from weir.engine.cep import Pattern

C, A1, A2, A3, D = ev(40, "c"), ev(41, "a"), ev(42, "a"), ev(43, "a"), ev(44, "d")


def dummy(i: int) -> dict[str, Any]:
    return ev(100 + i, "dummy")


def _c_a_star_d() -> Pattern:
    return (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().optional().greedy()
        .followed_by("end").where(named("d"))
    )  # fmt: skip


def test_testGreedyZeroOrMore() -> None:
    events = [(1, C), (2, A1), (3, A2), (4, A3), (5, D)]
    same(feed(_c_a_star_d(), events), [[C, A1, A2, A3, D]])


def test_testGreedyZeroOrMoreInBetween() -> None:
    events = [(1, C), (2, dummy(1)), (3, A1), (4, dummy(2)), (5, A2), (6, dummy(3)), (7, A3),
              (8, D)]  # fmt: skip
    same(feed(_c_a_star_d(), events), [[C, A1, A2, A3, D]])


def test_testGreedyZeroOrMoreWithDummyEventsAfterQuantifier() -> None:
    events = [(1, C), (2, A1), (3, A2), (4, dummy(1)), (5, D)]
    same(feed(_c_a_star_d(), events), [[C, A1, A2, D]])


def test_testGreedyZeroOrMoreWithDummyEventsBeforeQuantifier() -> None:
    same(feed(_c_a_star_d(), [(1, C), (2, dummy(1)), (5, D)]), [[C, D]])


def test_an_optional_pattern_after_a_greedy_one_is_refused() -> None:
    """``testGreedyZeroOrMoreConsecutiveEndWithOptional``, ``testGreedyZeroOrMoreBeforeOptional``
    and ``testGreedyZeroOrMoreBeforeOptional2`` predate Flink's
    ``checkIfPreviousPatternGreedy``: Flink now refuses ``optional()`` after a greedy pattern
    ("Optional pattern cannot be preceded by greedy pattern"), and so does weir."""
    greedy = Pattern.begin("start").where(named("c")).followed_by("middle1").where(named("a"))
    greedy = greedy.one_or_more().optional().greedy()
    with pytest.raises(MalformedPatternError, match="cannot follow a greedy one"):
        greedy.followed_by("middle2").where(named("d")).optional()


def test_testGreedyUtilZeroOrMoreWithDummyEventsAfterQuantifier() -> None:
    a1, a2, a3 = {**A1, "price": 2.0}, {**A2, "price": 3.0}, {**A3, "price": 3.0}
    a4, d = {**ev(44, "a"), "price": 4.0}, {**D, "price": 3.0}
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().optional().greedy()
        .until(lambda e: e.get("price", 0) > 3.0)
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    events = [(1, C), (2, a1), (3, a2), (4, a3), (5, a4), (6, d)]
    same(feed(pattern, events), [[C, a1, a2, a3, d]])
