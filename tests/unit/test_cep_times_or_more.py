"""Flink CEP's ``TimesOrMoreITCase``, ported case by case (the Flink test's name in each test's),
on weir's NFA fed one event at a time (``test_cep_not_pattern.feed``). Flink runs each case
twice, without a window between the loop's events and with one of 3 ms
(``timesOrMore(2, windowTime)``); so does each test here (``window``: ``None`` or 3)."""

from __future__ import annotations

import pytest

from tests.unit.test_cep_not_pattern import feed, named, same
from weir.base.errors import MalformedPatternError
from weir.engine.cep import Pattern

# ConsecutiveData: start c, middle a1 a2 a3, end b; "f" events are unrelated.
WINDOWS = [pytest.param(None, id="no-window"), pytest.param(3, id="window-3ms")]
LOOSE = [("c", 1), ("f1", 2), ("a1", 3), ("f2", 4), ("a2", 5), ("a3", 6), ("b", 7)]
TIGHT = [("c", 1), ("a1", 3), ("a2", 5), ("a3", 6), ("b", 7)]


def start() -> Pattern:
    return Pattern.begin("start").where(named("c"))


def end(middle: Pattern) -> Pattern:
    return middle.followed_by("end1").where(named("b"))


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMore(window: int | None) -> None:
    middle = start().followed_by("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).allow_combinations())
    found = feed(p, [("c", 1), ("a1", 2), ("a2", 3), ("a3", 4), ("b", 6)])
    same(found, ["c a1 a2 a3 b", "c a1 a2 b", "c a1 a3 b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNonStrict(window: int | None) -> None:
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).allow_combinations())
    expected = ["c a1 a2 a3 b", "c a1 a2 b"]
    if window is None:
        expected += ["c a1 a3 b", "c a2 a3 b"]
    same(feed(p, LOOSE), expected)


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreStrict(window: int | None) -> None:
    # Flink's case uses times(2), without the window; it runs under both parameters
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times(2).consecutive())
    same(feed(p, LOOSE), ["c a2 a3 b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreStrictOptional(window: int | None) -> None:
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).consecutive().optional())
    same(feed(p, LOOSE), ["c a2 a3 b", "c b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreStrictOptional2(window: int | None) -> None:
    middle = start().next("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).consecutive().optional())
    same(feed(p, TIGHT), ["c a1 a2 a3 b", "c a1 a2 b", "c b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNonStrictOptional(window: int | None) -> None:
    middle = start().followed_by("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).optional())
    same(feed(p, [("c", 1), ("f1", 2), ("b", 7)]), ["c b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNonStrictOptional2(window: int | None) -> None:
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).allow_combinations().optional())
    expected = ["c a1 a2 a3 b", "c a1 a2 b", "c a2 a3 b", "c b"]
    if window is None:
        expected += ["c a1 a3 b"]
    same(feed(p, LOOSE), expected)


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNonStrictOptional3(window: int | None) -> None:
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).optional())
    same(feed(p, LOOSE), ["c a1 a2 a3 b", "c a1 a2 b", "c a2 a3 b", "c b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNonStrictWithNext(window: int | None) -> None:
    middle = start().next("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).allow_combinations())
    events = [("c", 1), ("a1", 2), ("f1", 3), ("a2", 4), ("f2", 5), ("a3", 6), ("b", 7)]
    expected = ["c a1 a2 a3 b", "c a1 a2 b"]
    if window is None:
        expected += ["c a1 a3 b"]
    same(feed(p, events), expected)


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNotStrictWithFollowedBy(window: int | None) -> None:
    middle = start().followed_by("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window))
    events = [("c", 1), ("a1", 2), ("a2", 4), ("a3", 6), ("b", 7)]
    same(feed(p, events), ["c a1 a2 a3 b", "c a1 a2 b"])


@pytest.mark.parametrize("window", WINDOWS)
def test_testTimesOrMoreNotStrictWithFollowedByAny(window: int | None) -> None:
    middle = start().followed_by_any("middle").where(named("a"))
    p = end(middle.times_or_more(2, window_ms=window).allow_combinations())
    events = [("c", 1), ("a1", 2), ("a2", 4), ("a3", 6), ("b", 7)]
    expected = ["c a1 a2 a3 b", "c a1 a2 b"]
    if window is None:
        expected += ["c a2 a3 b", "c a1 a3 b"]
    same(feed(p, events), expected)


def test_a_window_between_events_must_be_a_positive_number_of_ms() -> None:
    with pytest.raises(MalformedPatternError, match="window_ms=0"):
        Pattern.begin("a").times_or_more(2, window_ms=0)


def test_the_window_between_events_shows_in_explain() -> None:
    p = Pattern.begin("a").where(named("a")).one_or_more(window_ms=7)
    assert p.describe()[0]["times_window_ms"] == 7
