"""Every window result record names its operator (issue 39, item 5; decision 0012): two
operators writing to one sink are told apart by ``"op"``, the name the HTTP answers use; a
field of that name is reserved."""

from __future__ import annotations

import pytest

from weir import Job, JobDefinitionError, WatermarkStrategy, agg, sources, testing, windows

EVENTS = [
    {"id": "a", "ts": 1, "value": 2},
    {"id": "a", "ts": 15, "value": 3},
    {"id": "b", "ts": 40, "value": 5},
]


def _two_operators() -> Job:
    job = Job("two")
    s = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
    )
    s.key_by("id").window(windows.tumbling(ms=10)).aggregate("per10", n=agg.count())
    s.key_by("id").window(windows.session(gap_ms=20)).aggregate(
        "visits", n=agg.count(), total=agg.sum("value")
    )
    return job


def test_each_result_record_names_its_operator_first() -> None:
    result = testing.run(_two_operators(), EVENTS)
    assert {r["op"] for r in result.results} == {"per10", "visits"}
    for op, records in result.by_operator.items():
        assert records and all(r["op"] == op for r in records)
        assert all(next(iter(r)) == "op" for r in records)  # first, as the answers put it
    assert sorted(
        (r["key"], r["start"], r["end"], r["n"], r["total"]) for r in result.by_operator["visits"]
    ) == [("a", 1, 35, 2, 5), ("b", 40, 60, 1, 5)]


def test_an_aggregate_named_op_is_refused() -> None:
    job = Job("clash")
    keyed = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts").key_by("id")
    with pytest.raises(JobDefinitionError, match=r"field name\(s\) op are reserved"):
        keyed.window(windows.tumbling(ms=10)).aggregate("w", op=agg.count())
