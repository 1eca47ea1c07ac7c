"""Every SQL window form against the brute-force model (tests/support/reference.py) and against the
equivalent Python job: identical emissions, late records included, for any batching."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.inprocess import build_job, run_batches
from tests.support.reference import Spec, group_emissions, simulate_decoded
from weir import Job, WatermarkStrategy, agg, sources, windows

AGGS = "COUNT(*) AS `count`, SUM(`value`) AS total, MIN(`value`) AS lo, MAX(`value`) AS hi, "
# SQL's AVG over integers is an integer (Flink's); over doubles the mean the model's ``avg`` is
AGGS += "AVG(CAST(`value` AS DOUBLE)) AS `avg`"
WHERE = "WHERE event = 'impression'"


def _interval(ms: int) -> str:
    return f"INTERVAL '{ms}' MILLISECOND"


def tvf_query(spec: Spec) -> str:
    if spec.gap is not None:
        window = f"SESSION(TABLE events PARTITION BY id, DESCRIPTOR(ts), {_interval(spec.gap)})"
    elif spec.step is not None:
        step, size = _interval(spec.step), _interval(spec.size)
        window = f"CUMULATE(TABLE events, DESCRIPTOR(ts), {step}, {size})"
    elif spec.slide is not None:
        window = (
            f"HOP(TABLE events, DESCRIPTOR(ts), {_interval(spec.slide)}, {_interval(spec.size)})"
        )
    else:
        window = f"TUMBLE(TABLE events, DESCRIPTOR(ts), {_interval(spec.size)})"
    return (
        f"SELECT id, window_start, window_end, {AGGS} FROM TABLE({window}) {WHERE} "
        "GROUP BY id, window_start, window_end"
    )


def legacy_query(spec: Spec) -> str:
    if spec.gap is not None:
        call = f"SESSION(ts, {_interval(spec.gap)})"
    elif spec.slide is not None:
        call = f"HOP(ts, {_interval(spec.slide)}, {_interval(spec.size)})"
    else:
        call = f"TUMBLE(ts, {_interval(spec.size)})"
    kind = call.split("(")[0]
    bounds = f"{kind}_START({call[len(kind) + 1 : -1]}), {kind}_END({call[len(kind) + 1 : -1]})"
    return f"SELECT id, {bounds}, {AGGS} FROM events {WHERE} GROUP BY {call}, id"


def sql_job(spec: Spec, query: str, **extra: Any) -> Job:
    job = Job("inproc")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=spec.bound),
    )
    job.sql(spec.op, query, tables={"events": events}, allowed_lateness_ms=spec.lateness, **extra)
    return job


def _plain(late: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Late records without the field the query's map derived (``CAST(value AS DOUBLE)``)."""
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("__sql_")}  # noqa: E731
    return [{**x, "record": strip(x["record"])} for x in late]


def _ev(key: str, t: int, value: float = 1, event: str = "impression") -> dict[str, Any]:
    return {"id": key, "event": event, "ts": t, "value": value}


# late, within-lateness and on-time records for keys a and b, clicks filtered out
EVENTS = [
    _ev("a", 5, 3), _ev("b", 40, 2.5), _ev("a", 130, 7), _ev("a", 90, 1, "click"),
    _ev("b", 260, -4), _ev("a", 20, 10), _ev("a", 420, 2), _ev("b", 90, 6),
    _ev("a", 150, 5), _ev("b", 700, 1), _ev("a", 30, 8), _ev("a", 1_000, 9),
]  # fmt: skip
SPECS = {
    "tumble": Spec(bound=50, size=100, lateness=150),
    "hop": Spec(bound=50, size=100, slide=25, lateness=150),
    "session": Spec(bound=50, size=1, gap=60, lateness=150),
    "cumulate": Spec(bound=50, size=100, step=25, lateness=150),
}


FORMS = [
    (w, f) for w in sorted(SPECS) for f in ("tvf", "legacy") if (w, f) != ("cumulate", "legacy")
]


@pytest.mark.parametrize(("window", "form"), FORMS)
def test_each_sql_window_form_equals_the_reference_and_the_python_job(
    window: str, form: str
) -> None:
    spec = SPECS[window]
    query = tvf_query(spec) if form == "tvf" else legacy_query(spec)
    sql_run = run_batches(EVENTS, spec, [1] * len(EVENTS), job=sql_job(spec, query))
    py_run = run_batches(EVENTS, spec, [1] * len(EVENTS), job=build_job(spec))
    ref = simulate_decoded(EVENTS, spec)
    assert ref.late, "the events must include late records"
    assert group_emissions(sql_run.results) == ref.emissions
    assert sql_run.results == py_run.results
    assert _plain(sql_run.late) == py_run.late
    assert [r["record"] for r in _plain(sql_run.late)] == [r["record"] for r in ref.late]


class DistinctValues:
    """The Python job's COUNT(DISTINCT value): a set kept as a msgpack map."""

    def create(self) -> dict[str, int]:
        return {}

    def add(self, acc: dict[str, int], record: dict[str, Any]) -> dict[str, int]:
        v = record["value"]
        acc[f"{type(v).__name__}:{v}"] = 1
        return acc

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {**a, **b}

    def result(self, acc: dict[str, int]) -> int:
        return len(acc)


def _distinct_python_job(spec: Spec) -> Job:
    job = build_job(spec)
    op = job.operators[spec.op]
    op.aggregates["kinds"] = agg.custom(DistinctValues())
    return job


_event = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "c"]),
        "event": st.sampled_from(["impression", "impression", "click"]),
        "ts": st.integers(-300, 1_500),
        "value": st.integers(-5, 5),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(_event, max_size=40),
    window_form=st.sampled_from(FORMS),
    lateness=st.sampled_from([0, 120]),
    cuts=st.lists(st.integers(1, 7), max_size=8),
)
def test_random_events_give_the_reference_windows_and_the_python_jobs_count_distinct(
    events: list[dict[str, Any]], window_form: tuple[str, str], lateness: int, cuts: list[int]
) -> None:
    window, form = window_form
    base = SPECS[window]
    spec = Spec(bound=base.bound, size=base.size, slide=base.slide, gap=base.gap,
                step=base.step, lateness=lateness)  # fmt: skip
    query = tvf_query(spec) if form == "tvf" else legacy_query(spec)
    query = query.replace(" FROM ", ", COUNT(DISTINCT `value`) AS kinds FROM ", 1)
    sql_run = run_batches(events, spec, cuts, job=sql_job(spec, query))
    without_kinds = [{k: v for k, v in r.items() if k != "kinds"} for r in sql_run.results]
    assert group_emissions(without_kinds) == simulate_decoded(events, spec).emissions
    py_run = run_batches(events, spec, cuts, job=_distinct_python_job(spec))
    assert sql_run.results == py_run.results
    assert _plain(sql_run.late) == py_run.late


def test_count_of_a_column_counts_its_non_null_values_and_a_window_alone_keys_by_star() -> None:
    spec = SPECS["tumble"]
    events = [{**e, "event": None} if i % 3 == 0 else e for i, e in enumerate(EVENTS)]
    query = (
        "SELECT window_start, window_end, COUNT(*) AS n, COUNT(event) AS with_event, "
        "SUM(`value` * 2) AS doubled FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), "
        "INTERVAL '100' MILLISECOND)) GROUP BY window_start, window_end"
    )
    job = Job("inproc")
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=spec.bound),
    )
    (
        stream.map(lambda e: {**e, "flag": int(e["event"] is not None), "v2": e["value"] * 2})
        .key_by(lambda e: "*")
        .window(windows.tumbling(ms=100), allowed_lateness_ms=spec.lateness)
        .aggregate("imps", n=agg.count(), with_event=agg.sum("flag"), doubled=agg.sum("v2"))
    )
    sql_run = run_batches(events, spec, [3] * 4, job=sql_job(spec, query))
    py_run = run_batches(events, spec, [3] * 4, job=job)
    assert {r["key"] for r in sql_run.results} == {"*"}
    assert sql_run.results == py_run.results
    assert any(r["with_event"] < r["n"] for r in sql_run.results)
