"""Triggers and evictors: early firings of an hourly window, and the last N records of a key."""

from weir import Job, agg, evictors, sources, testing, triggers, windows

job = Job("triggers")
keyed = job.source(sources.jsonl("plays.jsonl"), timestamp="ts").key_by("song")
(
    keyed.window(windows.tumbling(ms=3_600_000))  # hourly windows, updated every minute
    .trigger(triggers.continuous_event_time(60_000))
    .aggregate("hourly_running", n=agg.count())
)
(
    keyed.window(windows.global_windows())  # the mean of the last 3 records, every 2 records
    .trigger(triggers.count(2))
    .evictor(evictors.count(3))
    .aggregate("last_3", avg=agg.mean("secs"))
)

events = [{"song": "a", "ts": i * 30_000, "secs": 100 + 10 * i} for i in range(6)]
result = testing.run(job, events)
for op, rows in result.by_operator.items():
    print(op, [(r["start"], r["end"], r.get("n", r.get("avg")), r["final"]) for r in rows])
