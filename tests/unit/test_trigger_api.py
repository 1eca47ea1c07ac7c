"""The job API of count and global windows, triggers and evictors: what it builds, what
``weir explain`` shows, and the errors that name the value and the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest

from weir import (
    Job,
    JobDefinitionError,
    WatermarkStrategy,
    agg,
    evictors,
    sources,
    triggers,
    windows,
)
from weir.engine.explain import describe, render
from weir.engine.job import KeyedStream
from weir.engine.spark.plan import backfill_operator


def _keyed() -> tuple[Job, KeyedStream]:
    job = Job("j")
    stream = job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy()).key_by("id")
    return job, stream


def test_count_window_is_a_global_window_with_a_purging_count_trigger() -> None:
    job, keyed = _keyed()
    keyed.window(windows.count(100)).aggregate("c", n=agg.count())
    op = job.operators["c"]
    assert op.triggered
    assert op.trigger == triggers.purging(triggers.count(100)) and op.evictor is None


def test_sliding_count_window_is_a_count_evictor_and_a_count_trigger() -> None:
    job, keyed = _keyed()
    keyed.window(windows.count(100, slide=10)).aggregate("c", n=agg.count())
    op = job.operators["c"]
    assert op.trigger == triggers.count(10) and op.evictor == evictors.count(100)


def test_global_windows_never_fire_unless_a_trigger_says_so() -> None:
    job, keyed = _keyed()
    keyed.window(windows.global_windows()).aggregate("g", n=agg.count())
    assert job.operators["g"].trigger == triggers.never()


def test_time_windows_without_trigger_or_evictor_keep_the_fast_path() -> None:
    job, keyed = _keyed()
    keyed.window(windows.tumbling(ms=1000)).aggregate("t", n=agg.count())
    assert not job.operators["t"].triggered


def test_explain_shows_the_trigger_and_the_evictor() -> None:
    job, keyed = _keyed()
    (
        keyed.window(windows.tumbling(ms=1000))
        .trigger(triggers.purging(triggers.continuous_event_time(100)))
        .evictor(evictors.time(500, do_evict_after=True))
        .aggregate("t", n=agg.count())
    )
    text = render(describe(job))
    assert "trigger: purging(continuous_event_time(100))" in text
    assert "evictor: time(500, do_evict_after=True)" in text
    op: dict[str, Any] = describe(job)["sources"][0]["children"][0]["operators"][0]
    assert op["trigger"] == "purging(continuous_event_time(100))"


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: windows.count(0), r"windows.count\(0\): the count must be a positive integer"),
        (lambda: windows.count(5, slide=0), r"slide=0\): the slide must be a positive integer"),
        (lambda: triggers.count(-1), r"triggers.count\(-1\): the count must be a positive"),
        (lambda: triggers.continuous_event_time(0), r"continuous_event_time\(0\).*positive"),
        (lambda: triggers.continuous_processing_time(1.5), r"processing_time\(1.5\).*integer"),
        (lambda: triggers.purging(triggers.purging(triggers.count(2))), r"purges already"),
        (lambda: evictors.count(0), r"evictors.count\(0\): the count must be a positive"),
        (lambda: evictors.time(-5), r"evictors.time\(-5\): the span must be a positive"),
    ],
)
def test_bad_arguments_name_the_value_and_the_fix(build: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


def test_a_trigger_of_the_wrong_type_is_refused() -> None:
    _, keyed = _keyed()
    windowed = keyed.window(windows.global_windows())
    with pytest.raises(JobDefinitionError, match=r"trigger\(100\): pass a trigger from"):
        windowed.trigger(100)  # type: ignore[arg-type]
    with pytest.raises(JobDefinitionError, match=r"evictor\('evictors.count'\): pass an evictor"):
        windowed.evictor("evictors.count")  # type: ignore[arg-type]


def test_triggers_and_evictors_on_cumulate_windows_are_refused() -> None:
    """Session windows take both now (``test_flink_session_triggers.py``); cumulate windows
    keep their own firing rule."""
    _, keyed = _keyed()
    windowed = keyed.window(windows.cumulate(100, 10))
    with pytest.raises(JobDefinitionError, match=r"evictor\(\.\.\.\) on cumulate "):
        windowed.evictor(evictors.count(3))
    with pytest.raises(JobDefinitionError, match=r"use it on tumbling, sliding, session, count"):
        windowed.trigger(triggers.count(3))


@pytest.mark.parametrize("named", ["count windows", "trigger processing_time()"])
def test_the_backfill_refuses_triggered_operators_by_name(named: str) -> None:
    job, keyed = _keyed()
    if named == "count windows":
        keyed.window(windows.count(10)).aggregate("op", n=agg.count())
    else:
        keyed.window(windows.tumbling(ms=100)).trigger(triggers.processing_time()).aggregate(
            "op", n=agg.count()
        )
    with pytest.raises(
        JobDefinitionError, match=re.escape(f"operator 'op' has {named}, which")
    ) as refused:
        backfill_operator(job, None)
    assert refused.value.exit_code == 2  # `weir backfill` exits 2, a usage error
