from weir import Job, agg, sources, windows

job = Job("clicks")
(
    job.source(sources.jsonl("today.jsonl"), timestamp="ts")  # ts: epoch milliseconds
    .key_by("page")
    .window(windows.tumbling(ms=60_000))  # one window per page and minute
    .aggregate("per_minute", views=agg.count(), avg_ms=agg.mean("ms"))
)
