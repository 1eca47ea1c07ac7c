"""The rest of Flink CEP's ``AfterMatchSkipITCase`` (``test_cep_nfa.py`` has its first nine
cases), ported case by case (the Flink test's name in each test's), on weir's NFA fed one event
at a time. Flink's records carry no timestamp there: every event is at time 0, in arrival
order. An event's name is its label (``"ab1"``), conditions test what a name contains, as
Flink's do; matches compare as multisets of event sets (Flink's ``comparePatterns``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from weir.engine.cep import AfterMatchSkipStrategy, Pattern, SkipError
from weir.engine.cep.compiler import compile_pattern
from weir.engine.cep.matcher import Matcher

Skip = AfterMatchSkipStrategy


def has(part: str) -> Any:
    return lambda e: part in e["name"]


def feed(pattern: Pattern, labels: list[str], times: list[int] | None = None) -> list[str]:
    """The matches, each as its events' labels in time order joined by spaces."""
    matcher = Matcher(compile_pattern(pattern))
    state = matcher.new_state()
    out: list[str] = []
    for i, label in enumerate(labels):
        ts = 0 if times is None else times[i]
        event = {"name": label, "n": i}
        for o in matcher.run(state, [(ts, event)], ts):
            if o.kind == "match":
                events = sorted((e for evs in o.match.values() for e in evs), key=lambda e: e["n"])
                out.append(" ".join(e["name"] for e in events))
    return out


def same(found: list[str], expected: list[str]) -> None:
    assert Counter(found) == Counter(expected)


def test_testSkipPastLast3() -> None:
    p = Pattern.begin("a", Skip.skip_past_last_event()).where(has("a")).next("b").where(has("b"))
    same(feed(p, ["a1", "c", "a2", "b2"]), ["a2 b2"])


def test_testSkipToFirstWithOptionalMatch() -> None:
    p = (
        Pattern.begin("x", Skip.skip_to_first("b")).where(has("x")).one_or_more().optional()
        .next("b").where(has("b"))
        .next("c").where(has("c"))
    )  # fmt: skip
    same(feed(p, ["ab1", "c1", "ab2", "c2"]), ["ab1 c1", "ab2 c2"])


def test_testSkipToFirstAtStartPosition() -> None:
    p = Pattern.begin("b", Skip.skip_to_first("b")).where(has("b")).next("c").where(has("c"))
    same(feed(p, ["ab1", "c1", "ab2", "c2"]), ["ab1 c1", "ab2 c2"])


def _a_then_b_loop(skip: AfterMatchSkipStrategy) -> Pattern:
    return (
        Pattern.begin("a", skip).where(has("a"))
        .next("b").where(has("b")).one_or_more().consecutive()
    )  # fmt: skip


ABABBAB = ["a1", "b1", "a2", "b2", "b3", "a3", "b4"]


def test_testSkipToFirstWithOneOrMore() -> None:
    same(feed(_a_then_b_loop(Skip.skip_to_first("b")), ABABBAB), ["a1 b1", "a2 b2", "a3 b4"])


def test_testSkipToLastWithOneOrMore() -> None:
    same(feed(_a_then_b_loop(Skip.skip_to_last("b")), ABABBAB), ["a1 b1", "a2 b2", "a3 b4"])


def _missed(skip: AfterMatchSkipStrategy) -> list[str]:
    p = (
        Pattern.begin("a", skip).where(has("a"))
        .next("b").where(has("b")).one_or_more().optional().consecutive()
        .next("c").where(has("c"))
    )  # fmt: skip
    return feed(p, ["a", "c"])


def test_testSkipToFirstNonExistentPosition() -> None:
    with pytest.raises(SkipError):
        _missed(Skip.skip_to_first("b").throw_exception_on_miss())


def test_testSkipToFirstNonExistentPositionWithoutException() -> None:
    same(_missed(Skip.skip_to_first("b")), ["a c"])


def test_testSkipToLastNonExistentPosition() -> None:
    with pytest.raises(SkipError):
        _missed(Skip.skip_to_last("b").throw_exception_on_miss())


def test_testSkipToLastNonExistentPositionWithoutException() -> None:
    same(_missed(Skip.skip_to_first("b")), ["a c"])  # Flink's case uses skip_to_first too


def _a_loop_then_b(skip: AfterMatchSkipStrategy) -> list[str]:
    p = (
        Pattern.begin("a", skip).where(has("a")).one_or_more().consecutive().greedy()
        .next("b").where(has("b"))
    )  # fmt: skip
    return feed(p, ["a1", "a2", "a3", "b1"])


def test_testSkipPastLastWithOneOrMoreAtBeginning() -> None:
    same(_a_loop_then_b(Skip.skip_past_last_event()), ["a1 a2 a3 b1"])


def test_testSkipToLastWithOneOrMoreAtBeginning() -> None:
    same(_a_loop_then_b(Skip.skip_to_last("a")), ["a1 a2 a3 b1", "a3 b1"])


def test_testSkipToFirstWithOneOrMoreAtBeginning() -> None:
    same(_a_loop_then_b(Skip.skip_to_first("a")), ["a1 a2 a3 b1", "a2 a3 b1", "a3 b1"])


def test_testNoSkipWithOneOrMoreAtBeginning() -> None:
    same(_a_loop_then_b(Skip.no_skip()), ["a1 a2 a3 b1", "a2 a3 b1", "a3 b1"])


def test_testSkipToFirstDiscarding() -> None:
    a_or_c = lambda e: "a" in e["name"] or "c" in e["name"]  # noqa: E731
    b_or_c = lambda e: "b" in e["name"] or "c" in e["name"]  # noqa: E731
    p = (
        Pattern.begin("a or c", Skip.skip_to_first("c*")).where(a_or_c)
        .followed_by("b or c").where(b_or_c)
        .followed_by("c*").where(has("c")).one_or_more().greedy()
        .followed_by("d").where(has("d"))
    )  # fmt: skip
    same(feed(p, ["a", "b", "c1", "c2", "c3", "d"]), ["a b c1 c2 c3 d", "c1 c2 c3 d"])


def test_testSkipBeforeOtherAlreadyCompleted() -> None:
    price = {"a1": 0.0, "c1": 0.0, "a2": 1.0, "c2": 0.0, "b1": 1.0, "b2": 0.0}

    def b_priced_as_a(e: Any, ctx: Any) -> bool:
        return "b" in e["name"] and price[ctx.events_of("a")[0]["name"]] == price[e["name"]]

    p = (
        Pattern.begin("a", Skip.skip_to_first("c")).where(has("a"))
        .followed_by("c").where(has("c"))
        .followed_by("b").where(b_priced_as_a)
    )  # fmt: skip
    same(feed(p, ["a1", "c1", "a2", "c2", "b1", "b2"]), ["a1 c1 b2", "a2 c2 b1"])


def test_testSharedBufferIsProperlyCleared() -> None:
    matcher = Matcher(compile_pattern(
        Pattern.begin("start", Skip.skip_past_last_event()).where(lambda e: True).times(2)
    ))  # fmt: skip
    state = matcher.new_state()
    for i in range(4):
        matcher.run(state, [(i, {"name": "a", "n": i})], i)
    assert len(state.buffer) == 0 and state.buffer.nodes == {}
