"""Time kernels against ``engine.watermarks`` and ``engine.windows``, on both implementations,
over the whole signed 64-bit range (negative times and both ends included)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.kernels import Kernels
from weir.engine.kernels.timek import ALLOWED, LATE, ON_TIME
from weir.engine.watermarks import MIN_WATERMARK, per_record_watermarks
from weir.engine.windows import MAX_TIME, MIN_TIME, SlidingWindows, TumblingWindows, is_late

times = st.integers(MIN_TIME, MAX_TIME) | st.sampled_from(
    [MIN_TIME, MIN_TIME + 1, MAX_TIME, MAX_TIME - 1, 0, -1, 1, 9_999, 10_000, -10_001]
)
near = st.integers(-50_000, 50_000)
columns = st.lists(times | near, min_size=1, max_size=40)


@given(columns, st.integers(0, 1 << 40) | st.sampled_from([0, 2_000]), st.booleans())
def test_watermarks(kernels: Kernels, ts: list[int], bound: int, fresh: bool) -> None:
    start = MIN_WATERMARK if fresh else ts[0]
    wms, new_max = kernels.watermarks(np.array(ts, np.int64), start, bound)
    want, want_max = per_record_watermarks(ts, start, bound)
    assert wms.tolist() == want and new_max == want_max


@given(columns, st.integers(1, 1 << 40) | st.sampled_from([1, 7, 10_000]), st.data())
def test_tumbling_ends(kernels: Kernels, ts: list[int], size: int, data: st.DataObject) -> None:
    offset = data.draw(st.integers(-size + 1, size - 1))
    w = TumblingWindows(size_ms=size, offset_ms=offset)
    assert kernels.tumbling_ends(np.array(ts, np.int64), size, offset).tolist() == w.window_ends(ts)


@given(columns, st.integers(1, 1 << 40) | st.sampled_from([1, 3, 10]), st.integers(1, 6), st.data())
def test_sliding_expand(
    kernels: Kernels, ts: list[int], slide: int, per: int, data: st.DataObject
) -> None:
    size = slide * per + data.draw(st.integers(0, slide - 1))
    offset = data.draw(st.integers(-slide + 1, slide - 1))
    w = SlidingWindows(size_ms=size, slide_ms=slide, offset_ms=offset)
    ends, origin = kernels.sliding_expand(np.array(ts, np.int64), size, slide, offset)
    want_ends, want_origin = w.expand(ts)
    assert ends.tolist() == want_ends and origin.tolist() == want_origin


@given(st.lists(st.tuples(times, times), min_size=1, max_size=30), st.integers(0, 1 << 62))
def test_lateness(kernels: Kernels, pairs: list[tuple[int, int]], allowed: int) -> None:
    ends = [max(e, MIN_TIME + 1) for e, _ in pairs]
    wms = [w for _, w in pairs]
    codes = kernels.lateness(np.array(ends, np.int64), np.array(wms, np.int64), allowed)
    want = [
        ON_TIME if e - 1 > w else (LATE if is_late(e, allowed, w) else ALLOWED)
        for e, w in zip(ends, wms, strict=True)
    ]
    assert codes.tolist() == want
