"""Which operators one ``weir backfill`` computes (``engine/spark/plan.py``): every window
operator of the job by default, one with ``--op``; any operator it cannot compute refused by
name before Spark starts, rather than left out of the savepoint."""

from __future__ import annotations

from typing import Any

import pytest

from weir import Job, agg, sources, windows
from weir.base.errors import ConfigError, JobDefinitionError
from weir.engine.spark.plan import backfill_operator, backfill_operators


def _two_windows(job: Job) -> Any:
    s = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts")
    s.key_by("id").window(windows.tumbling(ms=10)).aggregate("imps", n=agg.count())
    s.key_by("id").window(windows.session(gap_ms=10)).aggregate("sess", n=agg.count())
    return s


def _emit(event: dict[str, Any], ctx: Any) -> None:
    ctx.emit(event)


def test_every_window_operator_by_default_or_the_one_op_names() -> None:
    job = Job("two")
    _two_windows(job)
    assert [o.name for o in backfill_operators(job, None)] == ["imps", "sess"]
    assert [o.name for o in backfill_operators(job, "sess")] == ["sess"]
    # one operator's own check still asks which
    with pytest.raises(ConfigError, match=r"several window operators \(imps, sess\)"):
        backfill_operator(job, None)
    with pytest.raises(JobDefinitionError, match="no window operator 'nope'"):
        backfill_operators(job, "nope")


def test_an_operator_the_backfill_cannot_compute_is_refused_by_name() -> None:
    job = Job("proc")
    _two_windows(job).key_by("id").process(_emit, name="enrich")
    with pytest.raises(JobDefinitionError, match=r"does not compute \(enrich: process"):
        backfill_operators(job, None)
    assert [o.name for o in backfill_operators(job, "imps")] == ["imps"]  # --op still works

    clocked = Job("clock")
    _two_windows(clocked).key_by("id").window(windows.tumbling(ms=10, time="processing")).aggregate(
        "wall", n=agg.count()
    )
    with pytest.raises(JobDefinitionError, match="operator 'wall' uses processing time"):
        backfill_operators(clocked, None)
