"""The public job API: what a job file may build, and the errors that name the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir import (
    Job,
    JobDefinitionError,
    WatermarkStrategy,
    agg,
    sinks,
    sources,
    triggers,
    windows,
)


def _keyed(job: Job):  # noqa: ANN202 - a KeyedStream
    return (
        job.source(
            sources.jsonl("/x.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5),
        )
        .filter(lambda e: True)
        .key_by("id")
    )


def test_a_valid_job_records_its_graph() -> None:
    job = Job("ad-stats", max_parallelism=64)
    result = (
        _keyed(job)
        .window(windows.tumbling(ms=1_000), allowed_lateness_ms=200)
        .aggregate("imps", count=agg.count(), total=agg.sum("value"))
        .sink(sinks.stdout())
    )
    assert list(job.operators) == ["imps"]
    op = job.operators["imps"]
    assert result.operator is op
    assert op.describe() == {
        "name": "imps",
        "type": "window",
        "window": {"type": "tumbling", "size_ms": 1_000, "time": "event"},
        "allowed_lateness_ms": 200,
        "aggregates": {"count": "count", "total": "sum"},
    }
    assert 1 <= op.state_id <= 0x7FFE
    assert op.timer_state_id == op.state_id | 0x8000
    job.validate()
    assert job.max_parallelism == 64
    assert "imps" in repr(job)


@pytest.mark.parametrize("name", ["", "has space", "-leading", "a/b", "x" * 65, "ü", 5])
def test_bad_job_names_are_refused(name: object) -> None:
    with pytest.raises(JobDefinitionError, match=r"job name .* is not allowed; use 1-64"):
        Job(name)  # type: ignore[arg-type]


def test_good_job_names() -> None:
    for name in ("a", "A.b_c-9", "9lives", "x" * 64):
        assert Job(name).name == name


@pytest.mark.parametrize("m", [0, 32769, 1.5])
def test_bad_max_parallelism(m: object) -> None:
    with pytest.raises(JobDefinitionError, match=rf"max_parallelism={m!r} must be an integer"):
        Job("j", max_parallelism=m)  # type: ignore[arg-type]


def test_bad_operator_name() -> None:
    with pytest.raises(JobDefinitionError, match="operator name 'a b' is not allowed"):
        _keyed(Job("j")).window(windows.tumbling(ms=10)).aggregate("a b", n=agg.count())


def test_duplicate_operator_names_are_refused() -> None:
    job = Job("j")
    keyed = _keyed(job)
    keyed.window(windows.tumbling(ms=10)).aggregate("imps", n=agg.count())
    with pytest.raises(JobDefinitionError, match="job 'j' has two operators named 'imps'"):
        keyed.window(windows.tumbling(ms=20)).aggregate("imps", n=agg.count())


@pytest.mark.parametrize("field", ["key", "start", "end", "final"])
def test_reserved_aggregate_field_names(field: str) -> None:
    ws = _keyed(Job("j")).window(windows.tumbling(ms=10))
    with pytest.raises(JobDefinitionError, match=f"field name.*{field}.*reserved"):
        ws.aggregate("imps", **{field: agg.count()})


def test_aggregate_without_aggregates() -> None:
    ws = _keyed(Job("j")).window(windows.tumbling(ms=10))
    with pytest.raises(JobDefinitionError, match=r"aggregate\('imps'\) has no aggregates"):
        ws.aggregate("imps")


def test_aggregate_value_that_is_not_an_aggregate() -> None:
    ws = _keyed(Job("j")).window(windows.tumbling(ms=10))
    with pytest.raises(JobDefinitionError, match=r"aggregate\('imps'\): aggregate n=5"):
        ws.aggregate("imps", n=5)


def test_negative_or_non_int_lateness() -> None:
    keyed = _keyed(Job("j"))
    with pytest.raises(JobDefinitionError, match="allowed_lateness_ms=-1 must be an integer >= 0"):
        keyed.window(windows.tumbling(ms=10), allowed_lateness_ms=-1)
    with pytest.raises(JobDefinitionError, match="allowed_lateness_ms=1.5"):
        keyed.window(windows.tumbling(ms=10), allowed_lateness_ms=1.5)  # type: ignore[arg-type]


def test_window_needs_an_assigner() -> None:
    with pytest.raises(JobDefinitionError, match=r"window\(10\): pass a window assigner"):
        _keyed(Job("j")).window(10)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", 5])
def test_bad_key_and_timestamp_selectors(bad: object) -> None:
    job = Job("j")
    with pytest.raises(JobDefinitionError, match="timestamp="):
        job.source(sources.jsonl("/a.jsonl"), timestamp=bad)  # type: ignore[arg-type]
    stream = Job("k").source(sources.jsonl("/a.jsonl"))
    with pytest.raises(JobDefinitionError, match="key_by"):
        stream.key_by(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("step", ["map", "filter", "flat_map"])
def test_stateless_steps_need_functions(step: str) -> None:
    stream = Job("j").source(sources.jsonl("/a.jsonl"))
    with pytest.raises(JobDefinitionError, match=f"{step}.*pass a function of one record"):
        getattr(stream, step)("not callable")


def test_job_without_source_fails_validation() -> None:
    with pytest.raises(JobDefinitionError, match="job 'j' has no source"):
        Job("j").validate()


def test_replace_source_and_sinks() -> None:
    job = Job("j")
    _keyed(job).window(windows.tumbling(ms=10)).aggregate("imps", n=agg.count()).sink(
        sinks.stdout()
    )
    job.replace_source(sources.jsonl(Path("/other.jsonl")))
    assert job.sources[0].source == sources.jsonl("/other.jsonl")
    job.replace_sinks(sinks.jsonl("/out.jsonl"))
    assert job.operators["imps"].sinks == [sinks.jsonl("/out.jsonl")]


def test_a_window_without_an_aggregate_is_refused_naming_it() -> None:
    job = Job("j")
    _keyed(job).window(windows.tumbling(ms=10_000))
    with pytest.raises(
        JobDefinitionError,
        match=r"job 'j': key_by\('id'\)\.window\(tumbling\(size_ms=10000\)\) has no aggregate"
        r".*add \.aggregate\(",
    ):
        job.validate()


def test_a_second_window_without_an_aggregate_is_refused_beside_a_finished_one() -> None:
    job = Job("j")
    keyed = _keyed(job)
    keyed.window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    keyed.window(windows.session(gap_ms=5))
    with pytest.raises(JobDefinitionError, match=r"window\(session\(gap_ms=5\)\) has no aggregate"):
        job.validate()


def test_a_key_by_with_nothing_after_it_is_refused_naming_what_to_add() -> None:
    job = Job("j")
    job.source(sources.jsonl("/x.jsonl")).map(lambda e: e).key_by(lambda e: e["id"])
    with pytest.raises(
        JobDefinitionError,
        match=r"key_by\(.*<lambda>\) has nothing after it.*\.window\(\.\.\.\)\.aggregate\("
        r".*\.process\(fn, name=",
    ):
        job.validate()


def test_finished_windows_and_process_functions_validate() -> None:
    job = Job("j")
    keyed = _keyed(job)
    keyed.window(windows.tumbling(ms=10)).trigger(triggers.count(2)).aggregate("n", n=agg.count())
    keyed.process(lambda e, ctx: None, name="p")
    job.validate()
