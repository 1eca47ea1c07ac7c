"""``DropLog``: the first drop of a reason at once, then one counted line per reason and
interval; a quiet interval makes the next drop a line of its own again."""

from __future__ import annotations

import logging

import pytest

from weir.engine.runtime.droplog import DropLog, reason_kind


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_drops_are_counted_per_reason_and_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    drops = DropLog(logging.getLogger("weir.test.drops"), "control:", interval_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="weir.test.drops"):
        drops.dropped("127.0.0.1:1", "a handshake frame of 7 bytes")
        for port in range(2, 502):
            clock.now += 0.01
            drops.dropped(f"127.0.0.{port % 3}:{port}", f"a handshake frame of {port} bytes")
        assert len(caplog.records) == 1  # the first, at once; the rest counted
        clock.now += 10.0
        drops.flush()
        assert len(caplog.records) == 2
        summary = caplog.records[1].getMessage()
        assert "count=500 hosts=3 last_peer=127.0.0.0:501" in summary
        assert "reason=a handshake frame of 501 bytes" in summary
        clock.now += 10.0
        drops.flush()  # a quiet interval: nothing to say, and the reason is forgotten
        drops.dropped("127.0.0.1:9", "a handshake frame of 9 bytes")
        assert len(caplog.records) == 3 and "peer=127.0.0.1:9" in caplog.records[2].getMessage()


def test_a_peer_cannot_vary_its_bytes_into_new_reasons() -> None:
    a = reason_kind("not a weir exchange handshake (starts b'\\x80\\x01')")
    assert a == reason_kind("not a weir exchange handshake (starts b'\\x80\\xff')")
    assert (
        reason_kind("claims worker 5, not one awaited here")
        == "claims worker N, not one awaited here"
    )


def test_past_the_reason_cap_the_rest_count_as_one(caplog: pytest.LogCaptureFixture) -> None:
    drops = DropLog(logging.getLogger("weir.test.cap"), "x:", clock=Clock())
    with caplog.at_level(logging.WARNING, logger="weir.test.cap"):
        for i in range(200):
            drops.dropped("h:1", f"reason {'ab'[i % 2] * (i + 1)}")
        drops.flush(force=True)
    assert len(caplog.records) <= 34
