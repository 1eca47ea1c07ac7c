"""The failure-rate restart strategy as a pure class, on an injected clock, and the flags that
configure it."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.base.errors import ConfigError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.restarts import FailureRateRestarts


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_at_most_n_restarts_within_the_interval() -> None:
    clock = Clock()
    rate = FailureRateRestarts(max_failures=3, interval_ms=60_000, clock=clock)
    assert [rate.allow() for _ in range(3)] == [True, True, True]
    assert rate.recent == 3
    assert not rate.allow()  # a fourth within the minute fails the job
    assert rate.recent == 3  # a refused failure is not a restart


def test_failures_older_than_the_interval_are_forgotten() -> None:
    clock = Clock()
    rate = FailureRateRestarts(max_failures=2, interval_ms=10_000, clock=clock)
    assert rate.allow()
    clock.now += 6.0
    assert rate.allow()
    clock.now += 3.0
    assert not rate.allow()  # two within the last 10 s
    clock.now += 1.0  # the first is exactly 10 s old: out of the window
    assert rate.recent == 1 and rate.allow()


def test_a_job_that_fails_once_a_week_runs_for_years() -> None:
    clock = Clock()
    rate = FailureRateRestarts(max_failures=1, interval_ms=3_600_000, clock=clock)
    for _week in range(52 * 5):
        assert rate.allow()
        clock.now += 7 * 24 * 3600.0


def test_no_restarts_at_all() -> None:
    assert not FailureRateRestarts(0, 1_000, Clock()).allow()


def test_defaults_and_the_old_flag_name() -> None:
    base = RunConfig(job_file=Path("j.py"))
    assert base.max_restarts == 0 and base.restart_interval_ms == 600_000
    assert RunConfig(job_file=Path("j.py"), checkpoint_interval_ms=100).max_restarts == 3
    assert RunConfig(job_file=Path("j.py"), restart_attempts=5).max_restarts == 5
    both = RunConfig(job_file=Path("j.py"), restart_attempts=5, restart_failures=5)
    assert both.max_restarts == 5


def test_old_and_new_flag_that_disagree_are_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"`restart_attempts`=2 and `restart_failures`=4 disagree"
    ):
        RunConfig(job_file=Path("j.py"), restart_attempts=2, restart_failures=4)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"restart_failures": -1}, "`restart_failures`=-1 is too small; use 0"),
        ({"restart_interval_ms": 0}, "`restart_interval_ms`=0 is too small; use 1 or more"),
    ],
)
def test_bad_restart_values_name_the_flag(kw: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RunConfig(job_file=Path("j.py"), **kw)  # type: ignore[arg-type]
