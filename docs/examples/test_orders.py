"""A pytest module for a job: weir.testing runs it in-process, no server, no files."""

from weir import Job, agg, sources, testing, windows


def make_job() -> Job:
    job = Job("orders")
    (
        job.source(sources.jsonl("orders.jsonl"), timestamp="ts")
        .key_by("shop")
        .window(windows.tumbling(ms=60_000), allowed_lateness_ms=10_000)
        .aggregate("revenue", n=agg.count(), total=agg.sum("cents"))
    )
    return job


def test_revenue_per_shop_and_minute() -> None:
    events = [
        {"shop": "north", "ts": 1_000, "cents": 999},
        {"shop": "south", "ts": 2_000, "cents": 500},
        {"shop": "north", "ts": 61_000, "cents": 1},
    ]
    result = testing.run(make_job(), events)
    final = {(r["key"], r["start"]): r["total"] for r in result.results if r["final"]}
    assert final == {("north", 0): 999, ("south", 0): 500, ("north", 60_000): 1}
    assert result.late == [] and result.dead == []


def test_a_record_past_the_lateness_is_late_not_lost() -> None:
    events = [
        {"shop": "north", "ts": 1_000, "cents": 1},
        {"shop": "north", "ts": 200_000, "cents": 1},  # moves the watermark far ahead
        {"shop": "north", "ts": 2_000, "cents": 7},  # its window ended long ago
    ]
    result = testing.run(make_job(), events)
    assert [late["ts"] for late in result.late] == [2_000]
