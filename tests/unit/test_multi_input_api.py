"""The job API of several inputs: sources with names, union, connect, and their errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.multiinput import (
    both_rows,
    ctr_rows,
    expected_both,
    expected_ctr,
    make_events,
    make_job,
)
from weir import Job, JobDefinitionError, agg, sources, testing, windows
from weir.engine.explain import describe, render
from weir.engine.job import CoProcessNode
from weir.engine.runtime.task.graph import graph_of, split_ids
from weir.engine.spark.plan import backfill_operator
from weir.engine.sql.errors import SqlError


class Enrich:
    def process1(self, event: Any, ctx: Any) -> None:
        ctx.value("last").set(event)

    def process2(self, event: Any, ctx: Any) -> None:
        ctx.emit({"key": ctx.key, "with": ctx.value("last").get()})


def _two(job: Job) -> tuple[Any, Any]:
    a = job.source(sources.jsonl("/a.jsonl"), name="clicks")
    b = job.source(sources.jsonl("/b.jsonl"))
    return a, b


def test_sources_are_named_and_names_are_unique() -> None:
    job = Job("j")
    a, b = _two(job)
    assert [s.name for s in job.sources] == ["clicks", "source-1"]
    with pytest.raises(JobDefinitionError, match="two sources named 'clicks'.*name="):
        job.source(sources.jsonl("/c.jsonl"), name="clicks")
    with pytest.raises(JobDefinitionError, match="source name 'a b' is not allowed"):
        job.source(sources.jsonl("/c.jsonl"), name="a b")


def test_split_ids_name_the_source_only_when_there_are_several() -> None:
    one = Job("one")
    one.source(sources.jsonl("/a.jsonl"))
    assert [s.id for s in split_ids(one, 2)] == ["/a.jsonl"]  # as one-source checkpoints hold
    job = Job("j")
    _two(job)
    assert [(s.source, s.id, s.split) for s in split_ids(job, 2)] == [
        (0, "clicks//a.jsonl", "/a.jsonl"),
        (1, "source-1//b.jsonl", "/b.jsonl"),
    ]


def test_union_attaches_downstream_steps_once_under_every_input() -> None:
    job = Job("j")
    a, b = _two(job)
    a.union(b).key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    graph = graph_of(job)
    assert len(graph.keyby) == 1 and graph.inputs == {"n": (0, 1)}
    only_a = a.key_by("id").window(windows.tumbling(ms=10)).aggregate("a_only", n=agg.count())
    assert graph_of(job).inputs["a_only"] == (0,)
    assert only_a.operator.name == "a_only"


def test_connect_builds_one_co_process_operator_under_two_key_bys() -> None:
    job = Job("j")
    a, b = _two(job)
    result = a.connect(b).key_by("id", "ad").process(Enrich(), name="enriched")
    op = result.operator
    assert isinstance(op, CoProcessNode) and op.key == "id" and op.second_key == "ad"
    graph = graph_of(job)
    assert len(graph.keyby) == 2 and graph.inputs == {"enriched": (0, 1)}
    assert [o.name for o in graph.operators] == ["enriched"]
    keyed = Job("k")
    c, d = _two(keyed)
    keyed_op = c.key_by("id").connect(d.key_by("id")).process(Enrich(), name="e").operator
    assert isinstance(keyed_op, CoProcessNode)


def test_connect_and_union_errors_name_the_fix() -> None:
    job = Job("j")
    a, b = _two(job)
    other = Job("other").source(sources.jsonl("/x.jsonl"))
    with pytest.raises(JobDefinitionError, match="jobs 'j' and 'other'; a job can only union"):
        a.union(other)
    with pytest.raises(JobDefinitionError, match=r"union\(\): pass one or more streams"):
        a.union()
    with pytest.raises(JobDefinitionError, match=r"connect\(5\): pass a DataStream"):
        a.connect(5)  # type: ignore[arg-type]
    with pytest.raises(JobDefinitionError, match="process1.*process2"):
        a.connect(b).key_by("id", "id").process(lambda e, c: None, name="p")
    keyed = a.key_by("id")
    with pytest.raises(JobDefinitionError, match="cannot be connected to itself; call key_by"):
        keyed.connect(keyed)
    with pytest.raises(JobDefinitionError, match="pass a keyed stream of the same job"):
        keyed.connect(other.key_by("id"))
    a.connect(b).key_by("id", "id").process(Enrich(), name="dup")
    with pytest.raises(JobDefinitionError, match="two operators named 'dup'"):
        a.connect(b).key_by("id", "id").process(Enrich(), name="dup")


def test_replace_source_refuses_several_sources() -> None:
    job = Job("j")
    _two(job)
    with pytest.raises(
        JobDefinitionError, match=r"reads 2 sources \(clicks, source-1\); `source_url`"
    ):
        job.replace_source(sources.jsonl("/c.jsonl"))


def test_explain_shows_sources_unions_and_connected_operators() -> None:
    job = Job("j")
    a, b = _two(job)
    a.union(b).key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    a.connect(b).key_by("id", "id").process(Enrich(), name="enriched")
    text = render(describe(job))
    assert "source clicks: file:///a.jsonl" in text
    assert "source source-1: file:///b.jsonl" in text
    assert "union of clicks, source-1" in text
    assert "co-process operator enriched: Enrich (input 1 of 2)" in text
    assert "co-process operator enriched: Enrich (input 2 of 2)" in text


class Sides:
    def process1(self, event: Any, ctx: Any) -> None:
        ctx.emit(["1", ctx.key, event["ts"]])

    def process2(self, event: Any, ctx: Any) -> None:
        ctx.emit(["2", ctx.key, event["ts"]])


def test_testing_runs_union_and_connect_of_one_source() -> None:
    job = Job("one")
    s = job.source(sources.jsonl("/a.jsonl"))
    views = s.filter(lambda e: e["event"] == "view")
    clicks = s.filter(lambda e: e["event"] == "click")
    views.union(clicks).key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    views.connect(clicks).key_by("id", "id").process(Sides(), name="sides")
    events = [
        {"id": "a", "ts": 1, "event": "view"},
        {"id": "a", "ts": 2, "event": "click"},
        {"id": "b", "ts": 3, "event": "other"},
    ]
    result = testing.run(job, events)
    assert result.by_operator["sides"] == [["1", "a", 1], ["2", "a", 2]]
    assert [(r["key"], r["n"]) for r in result.by_operator["n"]] == [("a", 2)]


@pytest.mark.parametrize("batch_size", [1, 7, 1024])
def test_testing_runs_a_job_of_several_sources_as_the_reference_says(batch_size: int) -> None:
    views, clicks = make_events(400, seed=5, step=30), make_events(250, seed=6, step=50)
    result = testing.run(make_job(), {"views": views, "clicks": clicks}, batch_size=batch_size)
    assert both_rows(result.by_operator["both"]) == sorted(expected_both(views, clicks))
    assert ctr_rows(result.by_operator["ctr"]) == sorted(expected_ctr(views, clicks))
    assert both_rows([{**r, "total": 0} for r in result.by_operator["views_only"]]) == sorted(
        (k, s, e, n, 0) for k, s, e, n, _ in expected_both(views, [])
    )
    assert result.late == [] and result.dead == []


def test_testing_holds_an_operator_back_only_by_the_sources_that_feed_it() -> None:
    """The window on ``views`` alone fires on views' watermark while ``clicks`` has sent
    nothing; the union's window waits for clicks (Flink's rule for several inputs)."""
    views = [{"id": "a", "ts": t, "value": 1} for t in (10, 20, 5_000)]
    with testing.Harness(make_job()) as harness:
        harness.feed(views, source="views")
        fired = {r["start"] for r in harness.by_operator["views_only"]}
        assert fired == {0}, harness.by_operator
        assert harness.by_operator["both"] == []
        harness.end("clicks")
        assert [r["n"] for r in harness.by_operator["both"]] == [2]


def test_testing_names_the_sources_when_events_do_not_match_them() -> None:
    job = make_job()
    with pytest.raises(JobDefinitionError, match=r"reads 2 sources \(views, clicks\); pass"):
        testing.run(job, [{"id": "a", "ts": 1, "value": 1}])
    with pytest.raises(JobDefinitionError, match=r"events for 'click': the job's sources are"):
        testing.run(job, {"click": []})
    with (
        testing.Harness(job) as harness,
        pytest.raises(
            JobDefinitionError, match=r"name the one these events come from: feed\(items, source="
        ),
    ):
        harness.feed([{"id": "a", "ts": 1, "value": 1}])


def test_the_backfill_refuses_several_sources_connect_and_union() -> None:
    job = Job("j")
    a, b = _two(job)
    a.key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    with pytest.raises(
        JobDefinitionError, match=r"reads 2 sources .*backfill computes jobs of one"
    ):
        backfill_operator(job, None)
    one = Job("one")
    s = one.source(sources.jsonl("/a.jsonl"))
    s.key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    s.connect(s).key_by("id", "id").process(Enrich(), name="enriched")
    with pytest.raises(JobDefinitionError, match="co-process operator enriched.*does not compute"):
        backfill_operator(one, "n")
    unioned = Job("u")
    t = unioned.source(sources.jsonl("/a.jsonl"))
    t.filter(bool).union(t.map(dict)).key_by("id").window(windows.tumbling(ms=10)).aggregate(
        "n", n=agg.count()
    )
    with pytest.raises(JobDefinitionError, match="has a union; the backfill does not compute"):
        backfill_operator(unioned, "n")


def test_sql_refuses_sources_whose_time_attributes_differ() -> None:
    job = Job("j")
    a = job.source(sources.jsonl("/a.jsonl"), timestamp="ts")
    job.source(sources.jsonl("/b.jsonl"), timestamp="at")
    sql = (
        "SELECT id, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), "
        "INTERVAL '1' SECOND)) GROUP BY id, window_start, window_end"
    )
    with pytest.raises(SqlError, match="different fields.*same timestamp="):
        job.sql("q", sql, tables={"a": a})


class _Limits:
    def process_broadcast_element(self, rule: Any, ctx: Any) -> None:
        ctx.broadcast_state("limits").put(rule["kind"], rule["limit"])

    def process_element(self, event: Any, ctx: Any) -> None:
        limit = ctx.broadcast_state("limits").get(event["kind"])
        if limit is not None and event["value"] > limit:
            ctx.emit([ctx.key, event["value"]])


def test_testing_feeds_a_broadcast_source_in_the_order_of_the_mapping() -> None:
    job = Job("limits")
    events = job.source(sources.jsonl("/e.jsonl"), name="events")
    rules = job.source(sources.jsonl("/r.jsonl"), name="rules")
    events.key_by("id").connect(rules.broadcast("limits")).process(_Limits(), name="limits")
    rule = [{"kind": "x", "limit": 5, "ts": 0}]
    evs = [{"id": "a", "kind": "x", "value": v, "ts": 10 + v} for v in range(8)]
    result = testing.run(job, {"rules": rule, "events": evs})
    assert result.by_operator["limits"] == [["a", 6], ["a", 7]]
    # events first: the rule arrives after them, so nothing was over a known limit
    assert testing.run(job, {"events": evs, "rules": rule}).by_operator["limits"] == []
