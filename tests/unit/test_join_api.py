"""The join API: what it builds (a co-process operator over two key_by nodes, with a declared
``late`` side output), and a message naming the value and the fix for each mistake."""

from __future__ import annotations

from typing import Any

import pytest

from weir import Job, JobDefinitionError, OutputTag, joins, sinks, sources, windows
from weir.engine.job import CoProcessNode, DataStream
from weir.engine.joins.interval import IntervalJoinFunction
from weir.engine.joins.window import WindowJoinFunction


def two_streams(job: Job | None = None) -> tuple[Job, DataStream, DataStream]:
    job = job or Job("j")
    ads = job.source(sources.jsonl("/unused.jsonl"))
    return job, ads.filter(lambda e: e["event"] == "impression"), ads.filter(lambda e: True)


def test_a_window_join_is_a_co_process_operator_with_a_late_output() -> None:
    job, a, b = two_streams()
    result = (
        a.join(b)
        .where("id")
        .equal_to(lambda e: e["ad"])
        .window(windows.sliding(size_ms=10, slide_ms=5))
        .apply(name="clicked")
    )
    op = result.operator
    assert isinstance(op, CoProcessNode) and job.operators["clicked"] is op
    assert isinstance(op.function, WindowJoinFunction)
    assert op.key == "id" and callable(op.second_key)
    assert op.side_outputs == {"late": []}
    result.side_output(joins.LATE).sink(sinks.jsonl("/tmp/late.jsonl"))
    assert len(op.side_outputs["late"]) == 1


def test_an_interval_join_keeps_its_bounds_and_exclusivity() -> None:
    job, a, b = two_streams()
    result = (
        a.key_by("id").interval_join(b.key_by("id")).between(-5, 7)
        .lower_bound_exclusive().upper_bound_exclusive().process(name="near")
    )  # fmt: skip
    fn = result.operator.function
    assert isinstance(fn, IntervalJoinFunction) and (fn.lower, fn.upper) == (-4, 6)
    assert result.operator.side_outputs == {"late": []}


def test_a_self_join_keys_each_side_on_its_own() -> None:
    _, a, _ = two_streams()
    op = a.join(a).where("id").equal_to("id").window(windows.tumbling(ms=5)).apply(name="self")
    assert isinstance(op.operator, CoProcessNode) and op.operator.second is not None


MISTAKES: list[tuple[str, Any, str]] = [
    ("where without equal_to",
     lambda a, b: a.join(b).where("id").window(windows.tumbling(ms=5)),
     r"where\('id'\) has no equal_to: call \.equal_to"),
    ("equal_to without where",
     lambda a, b: a.join(b).equal_to("id"),
     r"equal_to\('id'\) without where: name the left stream's key first"),
    ("window without keys",
     lambda a, b: a.join(b).window(windows.tumbling(ms=5)),
     r"without keys: call \.where\(<left key>\)\.equal_to"),
    ("a bad key",
     lambda a, b: a.join(b).where(3),
     r"where\(3\): pass a field name or a function of the record"),
    ("a cumulate window",
     lambda a, b: a.join(b).where("id").equal_to("id").window(windows.cumulate(10, 5)),
     r"join window\(CumulateWindows.*takes windows\.tumbling"),
    ("not a window",
     lambda a, b: a.join(b).where("id").equal_to("id").window(5_000),
     r"join window\(5000\): a window join takes windows\.tumbling"),
    ("processing time",
     lambda a, b: a.join(b).where("id").equal_to("id").window(
         windows.tumbling(ms=5, time="processing")),
     r"is on processing time; joins run on event time: drop time='processing'"),
    ("a join function that is not one",
     lambda a, b: a.join(b).where("id").equal_to("id").window(windows.tumbling(ms=5))
     .apply("f", name="x"),
     r"apply\(fn='f'\): pass a function fn\(left, right\)"),
    ("between(10, 5)",
     lambda a, b: a.key_by("id").interval_join(b.key_by("id")).between(10, 5),
     r"between\(10, 5\): the lower bound is above the upper one; pass between\(5, 10\)"),
    ("between with a float",
     lambda a, b: a.key_by("id").interval_join(b.key_by("id")).between(0.5, 5),
     r"between\(0\.5, 5\): lower_ms must be an integer of milliseconds"),
    ("process without between",
     lambda a, b: a.key_by("id").interval_join(b.key_by("id")).process(name="x"),
     r"without bounds: call \.between\(lower_ms, upper_ms\) first"),
    ("interval_join of an unkeyed stream",
     lambda a, b: a.key_by("id").interval_join(b),
     r"interval_join\(.*\): pass a keyed stream of the same job, e\.g\. a\.key_by"),
    ("an interval function that is not one",
     lambda a, b: a.key_by("id").interval_join(b.key_by("id")).between(0, 1)
     .process(OutputTag("x"), name="x"),
     r"process\(fn=OutputTag.*\): pass a function fn\(left, right, ctx\)"),
    ("a bad name",
     lambda a, b: a.join(b).where("id").equal_to("id").window(windows.tumbling(ms=5))
     .apply(name="no spaces"),
     r"operator name 'no spaces' is not allowed"),
]  # fmt: skip


@pytest.mark.parametrize("build,message", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_join_mistakes_name_the_value_and_the_fix(build: Any, message: str) -> None:
    _, a, b = two_streams()
    with pytest.raises(JobDefinitionError, match=message):
        build(a, b)


def test_streams_of_two_jobs_do_not_join() -> None:
    _, a, _ = two_streams()
    _, other, _ = two_streams(Job("other"))
    with pytest.raises(JobDefinitionError, match=r"jobs 'j' and 'other'; a job can only join"):
        a.join(other)
