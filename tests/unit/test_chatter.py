"""``Chatter`` lets a chatty logger's first line of each kind through, then at most one a kind
per interval with a count of those held back, and sums up the rest on ``flush`` (issue 39 item
4: librdkafka's identical connection failures)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from weir.base.chatter import Chatter, line_kind

FAIL = "FAIL [rdkafka#consumer-%d] [thrd:127.0.0.1:9/bootstrap]: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after %dms in state CONNECT)"  # noqa: E501


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def chatty(caplog: pytest.LogCaptureFixture) -> Iterator[tuple[logging.Logger, Chatter, Clock]]:
    clock = Clock()
    chatter = Chatter(interval_s=10.0, clock=clock)
    logger = logging.getLogger("tests.chatty")
    logger.addFilter(chatter)
    caplog.set_level(logging.DEBUG, "tests.chatty")
    yield logger, chatter, clock
    logger.removeFilter(chatter)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tests.chatty"]


def test_lines_differing_in_numbers_are_one_kind() -> None:
    assert line_kind(FAIL % (1, 0)) == line_kind(FAIL % (7, 12))
    assert line_kind("Connection refused") != line_kind("Name resolution failed")


def test_a_flood_is_one_line_a_kind_an_interval(
    chatty: tuple[logging.Logger, Chatter, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    logger, chatter, clock = chatty
    for i in range(500):
        logger.error(FAIL, i % 3, i)
        clock.now += 0.001
    logger.warning("another kind of line")
    said = _said(caplog)
    assert len(said) == 2 and said[0] == FAIL % (0, 0)
    clock.now += 10.0
    logger.error(FAIL, 1, 5)  # the interval passed: it carries the count
    assert _said(caplog)[-1] == FAIL % (1, 5) + " (and 499 more like it in the last 11 s)"
    for i in range(20):
        logger.error(FAIL, 1, i)
    chatter.flush()
    said = _said(caplog)
    assert len(said) == 4
    assert said[-1] == FAIL % (1, 19) + " (and 20 more like it in the last 0 s)"
    assert [r.levelname for r in caplog.records[-2:]] == ["ERROR", "ERROR"]
    chatter.flush()  # nothing held back: nothing said
    assert len(_said(caplog)) == 4
