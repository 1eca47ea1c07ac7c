"""Event time, watermarks and allowed lateness: which emissions a late record makes."""

from weir import Job, WatermarkStrategy, agg, sources, testing, windows

job = Job("views")
(
    job.source(
        sources.jsonl("views.jsonl"),  # replaced by the events below in testing.run
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000),
    )
    .key_by("page")
    .window(windows.tumbling(ms=10_000), allowed_lateness_ms=5_000)
    .aggregate("per_10s", views=agg.count())
)

events = [
    {"page": "home", "ts": 1_000},
    {"page": "home", "ts": 12_500},  # watermark 10_499: [0, 10 s) fires, not final
    {"page": "home", "ts": 2_000},  # within lateness: [0, 10 s) fires again
    {"page": "home", "ts": 19_000},  # watermark 16_999: [0, 10 s) is final
    {"page": "home", "ts": 3_000},  # too late: to the late-record output
]
result = testing.run(job, events)
for row in result.results:
    print(row["start"], row["end"], row["views"], row["final"])
for late in result.late:
    print("late:", late["ts"], "under watermark", late["watermark"])
