from weir import Job, agg, col, sources, windows

job = Job("clicks")  # the same job name: it finds its checkpoints
(
    job.source(sources.jsonl("events.jsonl"), timestamp="ts")
    .filter(col("page") != "healthz")  # new: load balancer probes are not page views
    .key_by("page")
    .window(windows.tumbling(ms=60_000))
    .aggregate("per_minute", views=agg.count(), avg_ms=agg.mean("ms"))  # the same operator
)
