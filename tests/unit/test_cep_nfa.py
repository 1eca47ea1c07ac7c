"""Flink CEP's ``NFAITCase`` and ``AfterMatchSkipITCase``, ported case by case (the Flink
test's name in each test's), on weir's NFA (``weir.engine.cep``) fed one event at a time as
Flink's ``feedNFA``/``NFATestHarness`` does. Events are ``{"id", "name"}``; a match is compared
as the ids of its events in pattern order, and the matches as a multiset (Flink's
``compareMaps``/``comparePatterns``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from weir.base.errors import MalformedPatternError
from weir.engine.cep import AfterMatchSkipStrategy, Pattern, SkipError
from weir.engine.cep.compiler import compile_pattern
from weir.engine.cep.matcher import Matcher

Event = dict[str, Any]


def ev(i: int, name: str) -> Event:
    return {"id": i, "name": name}


def named(n: str) -> Any:
    return lambda e: e["name"] == n


def has(part: str) -> Any:
    return lambda e: part in e["name"]


def feed(pattern: Pattern, events: list[tuple[int, Event]]) -> list[tuple[int, ...]]:
    """The matches, each as its events' ids in pattern order."""
    matcher = Matcher(compile_pattern(pattern))
    state = matcher.new_state()
    out: list[tuple[int, ...]] = []
    for ts, e in events:
        for o in matcher.run(state, [(ts, e)], ts):
            if o.kind == "match":
                out.append(tuple(x["id"] for evs in o.match.values() for x in evs))
    return out


def same(found: list[tuple[int, ...]], expected: list[list[Event]]) -> None:
    assert Counter(found) == Counter(tuple(e["id"] for e in m) for m in expected)


A, B, C, D, E = (ev(40 + i, n) for i, n in enumerate("abcde"))
FIVE = [(i + 1, e) for i, e in enumerate([A, B, C, D, E])]


def test_testNoConditionNFA() -> None:
    same(feed(Pattern.begin("start").followed_by("end"), FIVE), [[A, B], [B, C], [C, D], [D, E]])


def test_testAnyWithNoConditionNFA() -> None:
    found = feed(Pattern.begin("start").followed_by_any("end"), FIVE)
    same(found, [[x, y] for i, x in enumerate([A, B, C, D, E]) for y in [A, B, C, D, E][i + 1 :]])


def test_testSimplePatternNFA() -> None:
    start, middle, end = ev(41, "start"), {"id": 42, "name": "foo", "volume": 10.0}, ev(43, "end")
    events = [(1, start), (2, ev(43, "foobar")), (3, {"id": 41, "name": "barfoo", "volume": 5.0}),
              (3, middle), (4, ev(43, "start")), (5, end)]  # fmt: skip
    pattern = (
        Pattern.begin("start").where(named("start"))
        .followed_by("middle").where(lambda e: "volume" in e).where(lambda e: e["volume"] > 5.0)
        .followed_by("end").where(named("end"))
    )  # fmt: skip
    same(feed(pattern, events), [[start, middle, end]])


def _a_next_b() -> Pattern:
    return Pattern.begin("middle").where(named("a")).next("end").where(named("b"))


def test_testStrictContinuityWithResults() -> None:
    m, end = ev(41, "a"), ev(42, "b")
    same(feed(_a_next_b(), [(3, m), (5, end)]), [[m, end]])


def test_testStrictContinuityNoResults() -> None:
    same(feed(_a_next_b(), [(3, ev(41, "a")), (4, ev(42, "c")), (5, ev(43, "b"))]), [])


def _start_middle_end(within: int) -> Pattern:
    return (
        Pattern.begin("start").where(named("start"))
        .followed_by("middle").where(named("middle"))
        .followed_by("end").where(named("end")).within(within)
    )  # fmt: skip


def test_testSimplePatternWithTimeWindowNFA() -> None:
    start, middle, end = ev(2, "start"), ev(3, "middle"), ev(5, "end")
    events = [(1, ev(1, "start")), (2, start), (3, middle), (4, ev(4, "foobar")), (11, end),
              (13, ev(6, "end"))]  # fmt: skip
    same(feed(_start_middle_end(10), events), [[start, middle, end]])


def test_testSimplePatternWithTimeoutHandling() -> None:
    events = [(1, ev(1, "start")), (2, ev(2, "start")), (3, ev(3, "middle")),
              (4, ev(4, "foobar")), (11, ev(5, "end")), (13, ev(6, "end"))]  # fmt: skip
    pattern = (
        Pattern.begin("start").where(named("start"))
        .followed_by_any("middle").where(named("middle"))
        .followed_by_any("end").where(named("end")).within(10)
    )  # fmt: skip
    matcher = Matcher(compile_pattern(pattern))
    state = matcher.new_state()
    matches, timeouts = 0, set()
    for ts, e in events:
        for o in matcher.run(state, [(ts, e)], ts):
            if o.kind == "match":
                matches += 1
            else:
                shown = tuple((k, tuple(x["id"] for x in v)) for k, v in o.match.items())
                timeouts.add((shown, o.ts))
    assert matches == 1
    assert timeouts == {
        ((("start", (1,)), ("middle", (3,))), 11),
        ((("start", (2,)), ("middle", (3,))), 12),
        ((("start", (1,)),), 11),
        ((("start", (2,)),), 12),
    }  # Flink reports the time of the event that found them out (11, 13); weir start + within


def test_testBranchingPattern() -> None:
    start, m1, m2, m3 = ev(40, "start"), ev(41, "foo1"), ev(42, "foo2"), ev(43, "foo3")
    n1, n2, end = ev(44, "next-one"), ev(45, "next-one"), ev(46, "end")
    for e, vol in ((m1, 10.0), (m2, 10.0), (m3, 10.0), (n1, 2.0), (n2, 2.0)):
        e["volume"] = vol
    events = [(1, start), (3, m1), (4, m2), (5, m3), (6, n1), (7, n2), (8, end)]
    pattern = (
        Pattern.begin("start").where(named("start"))
        .followed_by_any("middle-first").where(lambda e: e.get("volume", 0) > 5.0)
        .followed_by_any("middle-second").where(named("next-one"))
        .followed_by_any("end").where(named("end"))
    )  # fmt: skip
    same(feed(pattern, events), [[start, m, n, end] for m in (m1, m2, m3) for n in (n1, n2)])


C1, A1, A2, A3 = ev(40, "c"), ev(41, "a"), ev(42, "a"), ev(43, "a")


def test_testComplexBranchingAfterZeroOrMore() -> None:
    e1, e2, e3, e4 = ev(44, "b"), ev(45, "d"), ev(46, "d"), ev(47, "e")
    events = [(1, C1), (3, A1), (4, A2), (5, A3), (6, e1), (7, e2), (8, e3), (9, e4)]
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("middle").where(named("a")).one_or_more().allow_combinations().optional()
        .followed_by_any("end1").where(named("b"))
        .followed_by_any("end2").where(named("d"))
        .followed_by_any("end3").where(named("e"))
    )  # fmt: skip
    subsets = [[A1, A2, A3], [A1, A2], [A1, A3], [A2, A3], [A1], [A2], [A3], []]
    same(feed(pattern, events), [[C1, *s, e1, d, e4] for d in (e2, e3) for s in subsets])


def test_testZeroOrMore() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("middle").where(named("a")).one_or_more().allow_combinations().optional()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (3, A1), (4, A2), (6, end)])
    same(found, [[C1, A1, A2, end], [C1, A1, end], [C1, A2, end], [C1, end]])


def test_testEagerZeroOrMore() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).one_or_more().optional()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (3, A1), (4, A2), (5, ev(50, "d")), (6, A3), (7, end)])
    same(found, [[C1, A1, A2, A3, end], [C1, A1, A2, end], [C1, A1, end], [C1, end]])


def test_testBeginWithZeroOrMore() -> None:
    m1, m2, m3, end = ev(40, "a"), ev(41, "a"), ev(411, "a"), ev(42, "b")
    pattern = (
        Pattern.begin("middle").where(named("a")).one_or_more().optional()
        .followed_by("end").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(3, m1), (4, m2), (5, m3), (6, end)])
    same(found, [[m1, m2, m3, end], [m1, m2, end], [m2, m3, end], [m1, end], [m2, end],
                 [m3, end], [end]])  # fmt: skip


def test_testZeroOrMoreAfterZeroOrMore() -> None:
    m1, m2, m3, end = ev(41, "a"), ev(42, "d"), ev(43, "d"), ev(44, "e")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("middle-first").where(named("a")).one_or_more().allow_combinations()
        .optional()
        .followed_by("middle-second").where(named("d")).one_or_more().allow_combinations()
        .optional()
        .followed_by("end").where(named("e"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (3, m1), (4, m2), (5, m3), (6, end)])
    same(found, [[C1, m1, m2, m3, end], [C1, m1, m2, end], [C1, m2, m3, end], [C1, m2, end],
                 [C1, m1, end], [C1, end]])  # fmt: skip


def test_testZeroOrMoreAfterBranching() -> None:
    m1, m2, merging = ev(41, "a"), ev(42, "a"), ev(421, "f")
    k1, k2, end = ev(43, "d"), ev(44, "d"), ev(45, "e")
    events = [(1, C1), (3, m1), (4, m2), (5, merging), (6, k1), (7, k2), (8, end)]
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("branching").where(named("a"))
        .followed_by_any("merging").where(named("f"))
        .followed_by_any("kleene").where(named("d")).one_or_more().allow_combinations()
        .optional()
        .followed_by("end").where(named("e"))
    )  # fmt: skip
    kleenes = ([], [k1], [k2], [k1, k2])
    same(feed(pattern, events), [[C1, m, merging, *k, end] for m in (m1, m2) for k in kleenes])


def test_testStrictContinuityNoResultsAfterZeroOrMore() -> None:
    pattern = (
        Pattern.begin("start").where(named("d"))
        .followed_by("middle").where(named("a")).one_or_more().optional()
        .next("end").where(named("b"))
    )  # fmt: skip
    events = [(1, ev(40, "d")), (2, A1), (3, A2), (4, ev(43, "c")), (5, ev(44, "b"))]
    same(feed(pattern, events), [])


def test_testStrictContinuityResultsAfterZeroOrMore() -> None:
    start, end = ev(40, "d"), ev(43, "b")
    pattern = (
        Pattern.begin("start").where(named("d"))
        .followed_by_any("middle").where(named("a")).one_or_more().optional()
        .allow_combinations()
        .next("end").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, start), (2, A1), (3, A2), (5, end)])
    same(found, [[start, A1, A2, end], [start, A2, end]])


def test_testAtLeastOne() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("middle").where(named("a")).one_or_more().allow_combinations()
        .followed_by_any("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (3, A1), (4, A2), (6, end)])
    same(found, [[C1, A1, A2, end], [C1, A1, end], [C1, A2, end]])


def test_testBeginWithAtLeastOne() -> None:
    s1, s2, s3, end = ev(41, "a"), ev(42, "a"), ev(421, "a"), ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("a")).one_or_more().allow_combinations()
        .followed_by("end").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(3, s1), (4, s2), (5, s3), (6, end)])
    same(found, [[s1, s2, s3, end], [s1, s2, end], [s1, s3, end], [s2, s3, end], [s1, end],
                 [s2, end], [s3, end]])  # fmt: skip


def test_testNextZeroOrMore() -> None:
    start, end = ev(40, "start"), ev(46, "end")
    mids = [ev(401, "middle"), ev(402, "middle"), ev(403, "middle")]
    pattern = (
        Pattern.begin("start").where(named("start"))
        .next("middle").where(named("middle")).one_or_more().optional().consecutive()
        .followed_by("end").where(named("end"))
    )  # fmt: skip
    events = [(1, start), (2, ev(1, "event")), (3, mids[0]), (4, mids[1]), (5, mids[2]),
              (6, end)]  # fmt: skip
    same(feed(pattern, events), [[start, end]])


def test_testAtLeastOneEager() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by_any("middle").where(named("a")).one_or_more()
        .followed_by_any("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (3, A1), (4, A2), (5, A3), (6, end)])
    same(found, [[C1, A1, A2, A3, end], [C1, A1, A2, end], [C1, A2, A3, end], [C1, A3, end],
                 [C1, A2, end], [C1, A1, end]])  # fmt: skip


def test_testOptional() -> None:
    middle, end = ev(43, "a"), ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .followed_by("middle").where(named("a")).optional()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    same(feed(pattern, [(1, C1), (5, middle), (6, end)]), [[C1, middle, end], [C1, end]])


def test_testTimes() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .next("middle").where(named("a")).times(2).allow_combinations()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(1, C1), (2, A1), (3, A2), (4, A3), (6, end)])
    same(found, [[C1, A1, A2, end], [C1, A1, A3, end]])


def test_testStartWithTimes() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("middle").where(named("a")).times(2).consecutive()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    found = feed(pattern, [(2, A1), (3, A2), (4, A3), (6, end)])
    same(found, [[A1, A2, end], [A2, A3, end]])


def test_testTimesNonStrictWithNext() -> None:
    end = ev(44, "b")
    pattern = (
        Pattern.begin("start").where(named("c"))
        .next("middle").where(named("a")).times(2).allow_combinations()
        .followed_by("end1").where(named("b"))
    )  # fmt: skip
    events = [(1, C1), (2, A1), (3, ev(23, "f")), (4, A2), (5, ev(24, "f")), (6, A3), (7, end)]
    same(feed(pattern, events), [[C1, A1, A2, end], [C1, A1, A3, end]])


# -- AfterMatchSkipITCase --------------------------------------------------------------------

SIX_A = [ev(i, "a") for i in range(1, 7)]


def _in_arrival(events: list[Event]) -> list[tuple[int, Event]]:
    """Flink's ``StreamRecord`` without a timestamp: every event at time 0, in arrival order."""
    return [(0, e) for e in events]


def _a_times_3(skip: AfterMatchSkipStrategy) -> Pattern:
    return Pattern.begin("start", skip).where(named("a")).times(3)


def test_testNoSkip() -> None:
    a = SIX_A
    found = feed(_a_times_3(AfterMatchSkipStrategy.no_skip()), _in_arrival(a))
    same(found, [a[0:3], a[1:4], a[2:5], a[3:6]])


def test_testSkipPastLast() -> None:
    a = SIX_A
    found = feed(_a_times_3(AfterMatchSkipStrategy.skip_past_last_event()), _in_arrival(a))
    same(found, [a[0:3], a[3:6]])


TA1, TB1, TA2, TB2 = ev(1, "a"), ev(2, "b"), ev(4, "a"), ev(5, "b")


def _two_variables_followed_by_any(skip: AfterMatchSkipStrategy) -> list[tuple[int, ...]]:
    pattern = (
        Pattern.begin("start", skip).where(named("a")).followed_by_any("end").where(named("b"))
    )
    return feed(pattern, _in_arrival([TA1, TB1, TA2, TB2]))


def test_testNoSkipWithFollowedByAny() -> None:
    found = _two_variables_followed_by_any(AfterMatchSkipStrategy.no_skip())
    same(found, [[TA1, TB1], [TA1, TB2], [TA2, TB2]])


def test_testSkipToNextWithFollowedByAny() -> None:
    found = _two_variables_followed_by_any(AfterMatchSkipStrategy.skip_to_next())
    same(found, [[TA1, TB1], [TA2, TB2]])


QA1, QB1, QB2, QB3 = ev(1, "a"), ev(2, "b"), ev(4, "b"), ev(5, "b")


def _quantifier_at_end(skip: AfterMatchSkipStrategy) -> list[tuple[int, ...]]:
    pattern = Pattern.begin("start", skip).where(named("a")).next("end").where(named("b"))
    return feed(pattern.one_or_more(), _in_arrival([QA1, QB1, QB2, QB3]))


def test_testNoSkipWithQuantifierAtTheEnd() -> None:
    found = _quantifier_at_end(AfterMatchSkipStrategy.no_skip())
    same(found, [[QA1, QB1, QB2, QB3], [QA1, QB1, QB2], [QA1, QB1]])


def test_testSkipToNextWithQuantifierAtTheEnd() -> None:
    same(_quantifier_at_end(AfterMatchSkipStrategy.skip_to_next()), [[QA1, QB1]])


AB = [ev(i, "ab") for i in range(1, 8)]


def _ab(skip: AfterMatchSkipStrategy) -> Pattern:
    return (
        Pattern.begin("start", skip).where(has("a")).times(2)
        .next("end").where(has("b")).times(2)
    )  # fmt: skip


def test_testSkipToFirst() -> None:
    found = feed(_ab(AfterMatchSkipStrategy.skip_to_first("end")), _in_arrival(AB[:6]))
    same(found, [AB[0:4], AB[2:6]])


def test_testSkipToLast() -> None:
    found = feed(_ab(AfterMatchSkipStrategy.skip_to_last("end")), _in_arrival(AB[:7]))
    same(found, [AB[0:4], AB[3:7]])


def test_testSkipPastLast2() -> None:
    a1, a2, b1, b2, c1, c2 = (ev(i, n) for i, n in enumerate(["a1", "a2", "b1", "b2", "c1", "c2"]))
    d1, d2 = ev(7, "d1"), ev(8, "d2")
    pattern = (
        Pattern.begin("a", AfterMatchSkipStrategy.skip_past_last_event()).where(has("a"))
        .followed_by_any("b").where(has("b"))
        .followed_by_any("c").where(has("c"))
        .followed_by("d").where(has("d"))
    )  # fmt: skip
    events = [(1, a1), (2, a2), (3, b1), (4, b2), (5, c1), (6, c2), (7, d1), (7, d2)]
    same(feed(pattern, events), [[a1, b1, c1, d1]])


def test_skip_to_first_throws_on_a_miss_when_asked() -> None:
    """Flink's ``testSkipToFirstElementOfMatch``: skipping to the match's first event would
    loop, so ``throwExceptionOnMiss`` fails instead."""
    skip = AfterMatchSkipStrategy.skip_to_first("a").throw_exception_on_miss()
    pattern = Pattern.begin("a", skip).where(named("x")).followed_by("b").where(named("y"))
    with pytest.raises(SkipError, match="first event"):
        feed(pattern, [(1, ev(1, "x")), (2, ev(2, "y"))])


# -- what a malformed pattern says (Flink's MalformedPatternException) --------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Pattern.begin("a").followed_by("a"), "used twice"),
        (lambda: Pattern.begin("a").one_or_more().times(2), "a quantifier is applied already"),
        (lambda: Pattern.begin("a").followed_by("b").not_followed_by("c"), "without a window"),
        (lambda: Pattern.begin("a", AfterMatchSkipStrategy.skip_to_first("z")), "does not have"),
        (lambda: Pattern.begin("a").until(named("x")), "looping patterns"),
        (lambda: Pattern.begin("a").within(0), "positive number"),
        (lambda: Pattern.begin("a").where(lambda x, y, z: True), "3 positional parameters"),
    ],
    ids=["name-twice", "two-quantifiers", "not-at-end", "skip-names-nothing", "until-single",
         "within-zero", "condition-arity"],
)  # fmt: skip
def test_a_malformed_pattern_is_refused_by_name(build: Any, message: str) -> None:
    with pytest.raises(MalformedPatternError, match=message):
        compile_pattern(build())


# -- NOT patterns and iterative conditions (derived from Flink's documented semantics) ----------


def test_not_next_drops_a_start_directly_followed_by_the_forbidden_event() -> None:
    """``a.not_next(b).followed_by(c)``: an ``a`` whose very next event is ``b`` matches
    nothing; one followed by anything else goes on to ``c``."""
    a1, b1, a2, x, c1 = ev(1, "a"), ev(2, "b"), ev(3, "a"), ev(4, "x"), ev(5, "c")
    pattern = (
        Pattern.begin("a").where(named("a"))
        .not_next("not").where(named("b"))
        .followed_by("c").where(named("c"))
    )  # fmt: skip
    same(feed(pattern, [(1, a1), (2, b1), (3, a2), (4, x), (5, c1)]), [[a2, c1]])


def test_not_followed_by_drops_a_match_with_the_forbidden_event_in_between() -> None:
    a1, b1, c1, a2, c2 = ev(1, "a"), ev(2, "b"), ev(3, "c"), ev(4, "a"), ev(5, "c")
    pattern = (
        Pattern.begin("a").where(named("a"))
        .not_followed_by("not").where(named("b"))
        .followed_by("c").where(named("c"))
    )  # fmt: skip
    same(feed(pattern, [(1, a1), (2, b1), (3, c1), (4, a2), (5, c2)]), [[a2, c2]])


def test_iterative_condition_sees_the_partial_match() -> None:
    """Flink's ``testIterativeCondition`` idea: a looping pattern takes an event only while the
    sum of what it took stays under a bound (``ctx.events_of``)."""

    def under_ten(e: Event, ctx: Any) -> bool:
        return e["name"] == "m" and sum(x["v"] for x in ctx.events_of("middle")) + e["v"] < 10

    s, m1, m2, m3, end = ev(1, "s"), ev(2, "m"), ev(3, "m"), ev(4, "m"), ev(5, "e")
    for e, v in ((m1, 4), (m2, 4), (m3, 4)):
        e["v"] = v
    pattern = (
        Pattern.begin("start").where(named("s"))
        .followed_by("middle").where(under_ten).one_or_more().consecutive()
        .followed_by("end").where(named("e"))
    )  # fmt: skip
    found = feed(pattern, [(1, s), (2, m1), (3, m2), (4, m3), (5, end)])
    same(found, [[s, m1, m2, end], [s, m1, end]])


# -- group patterns (derived from Flink's documented semantics) ---------------------------------


def _group() -> Pattern:
    return Pattern.begin("m1").where(named("a")).followed_by("m2").where(named("b"))


CABABD = [(i, ev(i, n)) for i, n in enumerate("cababd", 1)]
GC, GA1, GB1, GA2, GB2, GD = (e for _, e in CABABD)


def test_a_group_is_one_step_of_the_sequence() -> None:
    pattern = Pattern.begin("start").where(named("c")).next(_group())
    same(feed(pattern.followed_by("end").where(named("d")), CABABD), [[GC, GA1, GB1, GD]])
    begins = Pattern.begin(_group()).followed_by("end").where(named("d"))
    same(feed(begins, CABABD), [[GA1, GB1, GD], [GA2, GB2, GD]])


def test_a_quantified_group_repeats_the_whole_sequence() -> None:
    """A match maps each name to its events: two passes of the group give m1 [a1, a2] and
    m2 [b1, b2] (flattened here name by name)."""
    looped = Pattern.begin("start").where(named("c")).followed_by(_group()).one_or_more()
    found = feed(looped.followed_by("end").where(named("d")), CABABD)
    same(found, [[GC, GA1, GA2, GB1, GB2, GD], [GC, GA1, GB1, GD]])
    optional = Pattern.begin("start").where(named("c")).followed_by(_group()).optional()
    found = feed(optional.followed_by("end").where(named("d")), CABABD)
    same(found, [[GC, GA1, GB1, GD], [GC, GD]])
