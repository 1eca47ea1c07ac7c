"""Tumbling windows: [t - t mod s, t - t mod s + s), Python floor mod, negative time included."""

from __future__ import annotations

import pytest

from weir import windows
from weir.engine.windows import TumblingWindows, Window


@pytest.mark.parametrize(
    ("t", "size", "start"),
    [
        (0, 10, 0),
        (9, 10, 0),
        (10, 10, 10),  # t == end of [0, 10) belongs to the next window
        (19, 10, 10),
        (-1, 10, -10),
        (-10, 10, -10),
        (-11, 10, -20),
        (1_700_000_000_123, 1_000, 1_700_000_000_000),
        (5, 1, 5),
        (-7, 3, -9),
    ],
)
def test_assign(t: int, size: int, start: int) -> None:
    w = TumblingWindows(size_ms=size).assign(t)
    assert w == Window(start, start + size)
    assert w.start <= t < w.end
    assert w.max_timestamp == start + size - 1


def test_end_is_exclusive_at_the_boundary() -> None:
    tw = windows.tumbling(ms=100)
    assert tw.assign(99).end == 100
    assert tw.assign(100).start == 100
    assert tw.assign(-100).start == -100
    assert tw.assign(-101).end == -100


def test_window_ends_batch_form_and_start_of() -> None:
    tw = windows.tumbling(ms=10)
    ts = [0, 9, 10, -1, -10, -11, 25]
    ends = tw.window_ends(ts)
    assert ends == [10, 10, 20, 0, 0, -10, 30]
    assert [tw.start_of(e) for e in ends] == [tw.assign(t).start for t in ts]


def test_describe() -> None:
    assert windows.tumbling(ms=250).describe() == {
        "type": "tumbling",
        "size_ms": 250,
        "time": "event",
    }
    assert windows.tumbling(ms=1, time="processing").describe()["time"] == "processing"


@pytest.mark.parametrize("size", [0, -5])
def test_size_must_be_positive(size: int) -> None:
    with pytest.raises(ValueError, match=f"tumbling window size {size} ms must be positive"):
        windows.tumbling(ms=size)


def test_time_domain_is_checked() -> None:
    with pytest.raises(ValueError, match="time='wall'"):
        TumblingWindows(size_ms=5, time="wall")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("end", "lateness", "watermark", "late"),
    [
        (10, 0, 8, False),  # not fired yet
        (10, 0, 9, True),  # fired at end - 1, and no lateness allowed
        (10, 5, 13, False),  # fired, within lateness: an update, emitted again
        (10, 5, 14, True),  # end - 1 + lateness reached: late, and final
        (-(1 << 62), 0, -(1 << 63), False),  # no watermark yet: nothing is late
        ((1 << 62), 1 << 62, (1 << 63) - 1, True),  # the final watermark: past any lateness
    ],
)
def test_lateness_is_one_rule(end: int, lateness: int, watermark: int, late: bool) -> None:
    assert windows.is_late(end, lateness, watermark) is late
