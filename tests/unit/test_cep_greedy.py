"""Flink CEP's ``GreedyITCase``, ported case by case (the Flink test's name in each test's), on
weir's NFA fed one event at a time (``test_cep_nfa.feed``): every case of Flink's current file,
and the three it dropped when Flink began refusing ``optional()`` after a greedy pattern."""

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


def test_testGreedyUntilZeroOrMoreWithDummyEventsAfterQuantifier() -> None:
    a1, a2, a3 = {**A1, "price": 2.0}, {**A2, "price": 3.0}, {**A3, "price": 3.0}
    a4, d = {**ev(46, "a"), "price": 4.0}, {**D, "price": 3.0}
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().optional().greedy()
        .until(lambda e: e.get("price", 0) > 3.0)
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    events = [(1, C), (2, a1), (3, a2), (4, a3), (5, a4), (6, d)]
    same(feed(pattern, events), [[C, a1, a2, a3, d]])


def _priced(a4_first: bool) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """c, a (2.0), a (3.0), a (3.0), d (3.0) and an a priced 4.0, before the a's or after."""
    a1, a2, a3 = {**A1, "price": 2.0}, {**A2, "price": 3.0}, {**A3, "price": 3.0}
    a4, d = {**ev(46, "a"), "price": 4.0}, {**D, "price": 3.0}
    order = [C, a4, a1, a2, a3, d] if a4_first else [C, a1, a2, a3, a4, d]
    return [(i, e) for i, e in enumerate(order, 1)], [a1, a2, a3, d]


def _c_a_loop_until_d(optional: bool) -> Pattern:
    middle = Pattern.begin("start").where(named("c")).followed_by("middle").where(named("a"))
    middle = middle.one_or_more()
    if optional:
        middle = middle.optional()
    return (
        middle.greedy().until(lambda e: e.get("price", 0) > 3.0)
        .followed_by("end").where(named("d"))
    )  # fmt: skip


def test_testGreedyUntilWithDummyEventsBeforeQuantifier() -> None:
    events, (_, _, _, d) = _priced(a4_first=True)
    same(feed(_c_a_loop_until_d(optional=True), events), [[C, d]])


def _c_a_plus_d() -> Pattern:
    return (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().greedy()
        .followed_by("end").where(named("d"))
    )  # fmt: skip


def test_testGreedyOneOrMore() -> None:
    events = [(1, C), (2, A1), (3, A2), (4, A3), (5, D)]
    same(feed(_c_a_plus_d(), events), [[C, A1, A2, A3, D]])


def test_testGreedyOneOrMoreInBetween() -> None:
    events = [(1, C), (2, dummy(1)), (3, A1), (4, dummy(2)), (5, A2), (6, dummy(3)), (7, A3),
              (8, D)]  # fmt: skip
    same(feed(_c_a_plus_d(), events), [[C, A1, A2, A3, D]])


def test_testGreedyOneOrMoreWithDummyEventsAfterQuantifier() -> None:
    events = [(1, C), (2, A1), (3, A2), (4, dummy(1)), (5, D)]
    same(feed(_c_a_plus_d(), events), [[C, A1, A2, D]])


def test_testGreedyOneOrMoreWithDummyEventsBeforeQuantifier() -> None:
    assert feed(_c_a_plus_d(), [(1, C), (2, dummy(1)), (5, D)]) == []


def test_testGreedyUntilOneOrMoreWithDummyEventsAfterQuantifier() -> None:
    events, (a1, a2, a3, d) = _priced(a4_first=False)
    same(feed(_c_a_loop_until_d(optional=False), events), [[C, a1, a2, a3, d]])


def test_testGreedyUntilOneOrMoreWithDummyEventsBeforeQuantifier() -> None:
    events, _ = _priced(a4_first=True)
    assert feed(_c_a_loop_until_d(optional=False), events) == []


def test_testGreedyZeroOrMoreBeforeGroupPattern() -> None:
    d1, e1, d2, e2, f = ev(50, "d"), ev(51, "e"), ev(52, "d"), ev(53, "e"), ev(54, "f")
    pairs = Pattern.begin("middle1").where(named("d")).followed_by("middle2").where(named("e"))
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().optional().greedy()
        .followed_by(pairs).times(2)
        .followed_by("end").where(named("f"))
    )  # fmt: skip
    events = [(1, C), (2, A1), (3, A2), (4, dummy(1)), (5, A3), (6, d1), (7, e1), (8, d2),
              (9, e2), (10, f)]  # fmt: skip
    found = feed(pattern, events)
    # the match's events in time order (Flink's comparePatterns sorts them)
    assert sorted(tuple(sorted(m)) for m in found) == [
        tuple(sorted(e["id"] for e in [C, A1, A2, A3, d1, e1, d2, e2, f]))
    ]


def _c_then_a_star(consecutive: bool) -> Pattern:
    end = Pattern.begin("start").where(named("c")).followed_by("end").where(named("a"))
    end = end.one_or_more().optional()
    return (end.consecutive() if consecutive else end).greedy()


C_A_A_DUMMY_A = [(1, C), (2, A1), (3, A2), (4, dummy(1)), (5, A3)]


def test_testEndWithZeroOrMoreGreedy() -> None:
    found = feed(_c_then_a_star(consecutive=False), C_A_A_DUMMY_A)
    same(found, [[C], [C, A1], [C, A1, A2], [C, A1, A2, A3]])


def test_testEndWithZeroOrMoreConsecutiveGreedy() -> None:
    found = feed(_c_then_a_star(consecutive=True), C_A_A_DUMMY_A)
    same(found, [[C], [C, A1], [C, A1, A2]])


A4 = ev(45, "a")


def test_testEndWithGreedyTimesRange() -> None:
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("end").where(named("a")).times(2, 5).greedy()
    )  # fmt: skip
    events = [(1, C), (2, A1), (3, A2), (4, A3), (5, A4), (6, dummy(1))]
    same(feed(pattern, events), [[C, A1, A2], [C, A1, A2, A3], [C, A1, A2, A3, A4]])


def test_testGreedyTimesRange() -> None:
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).times(2, 5).greedy()
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    events = [(1, C), (2, A1), (3, A2), (4, A3), (5, A4), (6, D)]
    same(feed(pattern, events), [[C, A1, A2, A3, A4, D]])
