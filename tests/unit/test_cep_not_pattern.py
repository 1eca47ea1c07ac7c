"""Flink CEP's ``NotPatternITCase``, ported case by case (the Flink test's name in each test's),
on weir's NFA fed one event at a time as Flink's ``feedNFA`` does (time advanced to each event's
timestamp before it, arrival order kept even where timestamps go back). Flink's events are
``Event(id, name, price)`` with ids shared between events; here each event's ``id`` is its
variable name in the Flink test, and matches compare as multisets of event sets (Flink's
``comparePatterns`` sorts both sides)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from weir.base.errors import MalformedPatternError
from weir.engine.cep import AfterMatchSkipStrategy, Pattern, WithinType
from weir.engine.cep.compiler import compile_pattern
from weir.engine.cep.matcher import Matcher

Event = dict[str, Any]


def ev(label: str) -> Event:
    """An event named by its first letter (``"b4"`` is a ``b``)."""
    return {"id": label, "name": label[0]}


def named(n: str) -> Any:
    return lambda e: e["name"] == n


def feed(pattern: Pattern, events: list[tuple[str, int]]) -> list[tuple[str, ...]]:
    """The matches of ``(label, timestamp)`` events, each as its events' labels, sorted."""
    matcher = Matcher(compile_pattern(pattern))
    state = matcher.new_state()
    out: list[tuple[str, ...]] = []
    for label, ts in events:
        for o in matcher.run(state, [(ts, ev(label))], ts):
            if o.kind == "match":
                out.append(tuple(sorted(x["id"] for evs in o.match.values() for x in evs)))
    return out


def same(found: list[tuple[str, ...]], expected: list[str]) -> None:
    """``expected``: each match as its labels separated by spaces."""
    assert Counter(found) == Counter(tuple(sorted(m.split())) for m in expected)


def in_order(*labels: str) -> list[tuple[str, int]]:
    """Events at timestamps 0, 1, 2, ... (Flink's ``i++``)."""
    return [(label, i) for i, label in enumerate(labels)]


def test_testNotNext() -> None:
    p = (
        Pattern.begin("start").where(named("a"))
        .not_next("notPattern").where(named("b"))
        .followed_by_any("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    found = feed(p, [("a1", 1), ("c1", 2), ("b1", 3), ("c2", 4), ("d", 5)])
    same(found, ["a1 c1 d", "a1 c2 d"])


def test_testNotNextNoMatches() -> None:
    p = (
        Pattern.begin("start").where(named("a"))
        .not_next("notPattern").where(named("b"))
        .followed_by("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    assert feed(p, [("a1", 1), ("b1", 2), ("c1", 3), ("c2", 4), ("d", 5)]) == []


def test_testNotNextNoMatchesAtTheEnd() -> None:
    p = (
        Pattern.begin("start").where(named("a"))
        .followed_by_any("middle").where(named("c"))
        .followed_by_any("end").where(named("d"))
        .not_next("notPattern").where(named("b"))
    )  # fmt: skip
    assert feed(p, [("a1", 1), ("c1", 2), ("c2", 3), ("d", 4), ("b1", 5)]) == []


def _a_not_b_then(middle: Callable[[Pattern], Pattern]) -> Pattern:
    start = Pattern.begin("start").where(named("a")).not_followed_by("notPattern")
    return middle(start.where(named("b")).followed_by_any("middle").where(named("c")))


ACBCD = [("a1", 1), ("c1", 2), ("b1", 3), ("c2", 4), ("d", 5)]


def test_testNotFollowedBy() -> None:
    p = _a_not_b_then(lambda m: m.followed_by("end").where(named("d")))
    same(feed(p, ACBCD), ["a1 c1 d"])


def test_testNotFollowedByBeforeOptional() -> None:
    p = _a_not_b_then(lambda m: m.optional().followed_by("end").where(named("d")))
    same(feed(p, ACBCD), ["a1 c1 d"])


def _b_twice_not_c_then_d() -> Pattern:
    return (
        Pattern.begin("start").where(named("a"))
        .followed_by_any("middle").where(named("b")).times(2)
        .not_followed_by("notPattern").where(named("c"))
        .followed_by("end").where(named("d"))
    )  # fmt: skip


def test_testTimesWithNotFollowedBy() -> None:
    found = feed(_b_twice_not_c_then_d(), [("a1", 1), ("b1", 2), ("c", 3), ("b2", 4), ("d", 5)])
    assert found == []


def test_testIgnoreStateOfTimesWithNotFollowedBy() -> None:
    p = _a_not_b_then(lambda m: m.times(2).optional().followed_by("end").where(named("d")))
    events = [("a1", 1), ("d1", 2), ("e", 1), ("b1", 3), ("c1", 2), ("c2", 4), ("d2", 5)]
    same(feed(p, events), ["a1 d1"])


def test_testTimesWithNotFollowedByAfter() -> None:
    events = [("a1", 1), ("d1", 2), ("e", 1), ("b1", 3), ("b2", 3), ("c1", 2), ("d2", 5)]
    assert feed(_b_twice_not_c_then_d(), events) == []


def test_testNotFollowedByBeforeOptionalAtTheEnd() -> None:
    p = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by_any("end").where(named("c")).optional()
    )  # fmt: skip
    same(feed(p, [("a1", 1), ("c1", 2), ("b1", 3), ("c2", 4)]), ["a1 c1", "a1"])


def test_testNotFollowedByBeforeOptionalTimes() -> None:
    p = _a_not_b_then(lambda m: m.times(2).optional().followed_by("end").where(named("d")))
    same(feed(p, ACBCD), ["a1 c1 c2 d"])


def test_testNotFollowedByWithBranchingAtStart() -> None:
    p = (
        Pattern.begin("start").where(named("a"))
        .not_followed_by("notPattern").where(named("b"))
        .followed_by("middle").where(named("c"))
        .followed_by("end").where(named("d"))
    )  # fmt: skip
    events = [("a1", 1), ("b1", 2), ("c1", 3), ("a2", 4), ("c2", 5), ("d", 6)]
    same(feed(p, events), ["a2 c2 d"])


# -- NotFollowByData: a1, b1..b6, c1, d1 -------------------------------------------------------


def _not_next_after_one_or_more(all_matches: bool) -> list[tuple[str, ...]]:
    a = Pattern.begin("a").where(named("a"))
    b = a.followed_by_any("b*") if all_matches else a.followed_by("b*")
    p = (
        b.where(named("b")).one_or_more()
        .not_next("not c").where(named("c"))
        .followed_by("d").where(named("d"))
    )  # fmt: skip
    return feed(p, in_order("a1", "b1", "c1", "b2", "d1"))


def test_testNotNextAfterOneOrMoreSkipTillNext() -> None:
    assert _not_next_after_one_or_more(False) == []


def test_testNotNextAfterOneOrMoreSkipTillAny() -> None:
    same(_not_next_after_one_or_more(True), ["a1 b2 d1"])


def _not_followed_by_after_one_or_more(eager: bool, all_matches: bool) -> list[tuple[str, ...]]:
    a = Pattern.begin("a").where(named("a"))
    b = (a.followed_by_any("b*") if all_matches else a.followed_by("b*")).where(named("b"))
    b = b.one_or_more() if eager else b.one_or_more().allow_combinations()
    p = b.not_followed_by("not c").where(named("c")).followed_by("d").where(named("d"))
    return feed(p, in_order("a1", "b1", "b2", "b3", "c1", "b4", "b5", "b6", "d1"))


def test_testNotFollowedByNextAfterOneOrMoreEager() -> None:
    assert _not_followed_by_after_one_or_more(True, False) == []


def test_testNotFollowedByAnyAfterOneOrMoreEager() -> None:
    found = _not_followed_by_after_one_or_more(True, True)
    same(found, ["a1 b4 b5 b6 d1", "a1 b4 b5 d1", "a1 b4 d1", "a1 b5 b6 d1", "a1 b5 d1",
                 "a1 b6 d1"])  # fmt: skip


def test_testNotFollowedByNextAfterOneOrMoreCombinations() -> None:
    assert _not_followed_by_after_one_or_more(False, False) == []


def test_testNotFollowedByAnyAfterOneOrMoreCombinations() -> None:
    found = _not_followed_by_after_one_or_more(False, True)
    same(found, ["a1 b4 b5 b6 d1", "a1 b4 b5 d1", "a1 b4 b6 d1", "a1 b4 d1", "a1 b5 b6 d1",
                 "a1 b5 d1", "a1 b6 d1"])  # fmt: skip


def _not_followed_by_before(
    eager: bool, all_matches: bool, optional: bool
) -> list[tuple[str, ...]]:
    a = Pattern.begin("a").where(named("a")).not_followed_by("not c").where(named("c"))
    b = (a.followed_by_any("b*") if all_matches else a.followed_by("b*")).where(named("b"))
    b = b.one_or_more()
    if optional:
        b = b.optional()
    p = (b if eager else b.allow_combinations()).followed_by("d").where(named("d"))
    return feed(p, in_order("a1", "b1", "c1", "b4", "b5", "b6", "d1"))


EAGER_B_LOOP = ["a1 b1 b4 b5 b6 d1", "a1 b1 b4 b5 d1", "a1 b1 b4 d1", "a1 b1 d1"]
EVERY_B_LOOP = [
    "a1 b1 b4 b5 b6 d1", "a1 b1 b4 b6 d1", "a1 b1 b4 b5 d1", "a1 b1 b4 d1", "a1 b1 b5 b6 d1",
    "a1 b1 b5 d1", "a1 b1 b6 d1", "a1 b1 d1",
]  # fmt: skip


def test_testNotFollowedByAnyBeforeOneOrMoreEager() -> None:
    same(_not_followed_by_before(True, True, False), EAGER_B_LOOP)


def test_testNotFollowedByAnyBeforeOneOrMoreCombinations() -> None:
    same(_not_followed_by_before(False, True, False), EVERY_B_LOOP)


def test_testNotFollowedByBeforeOneOrMoreEager() -> None:
    same(_not_followed_by_before(True, False, False), EAGER_B_LOOP)


def test_testNotFollowedByBeforeOneOrMoreCombinations() -> None:
    same(_not_followed_by_before(False, False, False), EVERY_B_LOOP)


def test_testNotFollowedByBeforeZeroOrMoreEagerSkipTillNext() -> None:
    same(_not_followed_by_before(True, False, True), EAGER_B_LOOP)


def test_testNotFollowedByBeforeZeroOrMoreCombinationsSkipTillNext() -> None:
    same(_not_followed_by_before(False, False, True), EVERY_B_LOOP)


def test_testNotFollowedByBeforeZeroOrMoreEagerSkipTillAny() -> None:
    same(_not_followed_by_before(True, True, True), EAGER_B_LOOP)


def test_testNotFollowedByBeforeZeroOrMoreCombinationsSkipTillAny() -> None:
    same(_not_followed_by_before(False, True, True), EVERY_B_LOOP)


# -- windows --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "within_type",
    [
        pytest.param(WithinType.FIRST_AND_LAST, id="testNotFollowedByWithinFirstAndLastAtEnd"),
        pytest.param(
            WithinType.PREVIOUS_AND_CURRENT, id="testNotFollowedByWithinPreviousAndCurrentAtEnd"
        ),
    ],
)
def test_testNotFollowedByWithinAtEnd(within_type: WithinType) -> None:
    p = (
        Pattern.begin("a").where(named("a"))
        .not_followed_by("b").where(named("b")).within(3, within_type)
    )  # fmt: skip
    events = [("a1", 1), ("b1", 2), ("a2", 4), ("c", 5), ("b2", 10), ("a3", 11), ("b3", 13)]
    same(feed(p, events), ["a2"])


def test_testNotFollowByBeforeTimesWithin() -> None:
    p = (
        Pattern.begin("a").where(named("a"))
        .not_followed_by("b").where(named("b"))
        .followed_by("c").where(named("c")).times(0, 2).within(3)
    )  # fmt: skip
    events = [("a1", 1), ("b1", 2), ("a2", 10), ("c1", 11), ("c2", 12), ("a3", 20), ("c3", 21),
              ("c4", 24)]  # fmt: skip
    same(feed(p, events), ["a1", "a2", "a2 c1", "a2 c1 c2", "a3", "a3 c3"])


def test_testNotFollowedByWithinAtEndAfterMatch() -> None:
    p = (
        Pattern.begin("a", AfterMatchSkipStrategy.skip_past_last_event()).where(named("a"))
        .one_or_more().allow_combinations()
        .followed_by("c").where(named("c"))
        .not_followed_by("b").where(named("b")).within(5)
    )  # fmt: skip
    events = [("a1", 1), ("a2", 2), ("a3", 3), ("c1", 4), ("c2", 10)]
    same(feed(p, events), ["a1 a2 a3 c1"])


# -- what Flink refuses -----------------------------------------------------------------------


def test_a_previous_event_window_wider_than_the_whole_window_is_refused() -> None:
    p = (
        Pattern.begin("a").where(named("a"))
        .followed_by("b").where(named("b")).within(10, WithinType.PREVIOUS_AND_CURRENT)
        .within(5)
    )  # fmt: skip
    with pytest.raises(MalformedPatternError, match="wider than the pattern's within"):
        compile_pattern(p)


def test_within_refuses_a_type_that_is_not_a_within_type() -> None:
    with pytest.raises(MalformedPatternError, match="WithinType.PREVIOUS_AND_CURRENT"):
        Pattern.begin("a").within(5, "previous")  # type: ignore[arg-type]
