"""CUMULATE windows (``windows.cumulate``): the engine's assigner against the definition in
the reference model, and the checks on its size and step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.reference import cumulate_windows_of
from weir import windows
from weir.engine.sql import SqlError, SqlUnsupported
from weir.engine.windows import Window


@given(
    t=st.integers(-(1 << 40), 1 << 40),
    step=st.integers(1, 500),
    cycles=st.integers(1, 12),
)
def test_every_record_is_in_each_window_of_its_cycle_that_ends_after_it(
    t: int, step: int, cycles: int
) -> None:
    assigner = windows.cumulate(size_ms=step * cycles, step_ms=step)
    want = sorted(cumulate_windows_of(t, step * cycles, step))
    got = assigner.assign(t)
    assert sorted((w.start, w.end) for w in got) == want
    assert all(w.start <= t < w.end for w in got)
    assert all(assigner.start_of(w.end) == w.start for w in got)
    ends, origin = assigner.expand([t, t + 1])
    assert [e for e, o in zip(ends, origin, strict=True) if o == 0] == [w.end for w in got]


def test_the_first_window_of_a_cycle_holds_only_its_first_step() -> None:
    assigner = windows.cumulate(size_ms=100, step_ms=25)
    assert assigner.assign(0) == [Window(0, 100), Window(0, 75), Window(0, 50), Window(0, 25)]
    assert assigner.assign(99) == [Window(0, 100)]
    assert assigner.assign(-1) == [Window(-100, 0)]
    assert assigner.describe() == {"type": "cumulate", "size_ms": 100, "step_ms": 25,
                                   "time": "event"}  # fmt: skip


def test_a_step_must_divide_the_size() -> None:
    with pytest.raises(ValueError, match="step 30 ms does not divide the size 100 ms"):
        windows.cumulate(size_ms=100, step_ms=30)
    with pytest.raises(ValueError, match="must be positive"):
        windows.cumulate(size_ms=100, step_ms=0)


def test_sql_names_the_cumulate_mistakes(tmp_path: object) -> None:
    from weir import Job, WatermarkStrategy, sources

    job = Job("j")
    events = job.source(sources.jsonl("/x.jsonl"), timestamp="ts", watermarks=WatermarkStrategy())
    bad = ("SELECT id, window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE e, "
           "DESCRIPTOR(ts), INTERVAL '3' SECOND, INTERVAL '10' SECOND)) "
           "GROUP BY id, window_start, window_end")  # fmt: skip
    with pytest.raises(SqlError, match=r"CUMULATE\(.*\): cumulate step 3000 ms does not divide"):
        job.sql("v", bad, tables={"e": events})
    legacy = "SELECT id, COUNT(*) AS n FROM e GROUP BY CUMULATE(ts, INTERVAL '1' SECOND), id"
    with pytest.raises(SqlUnsupported, match="CUMULATE is a window table-valued function only"):
        job.sql("w", legacy, tables={"e": events})
