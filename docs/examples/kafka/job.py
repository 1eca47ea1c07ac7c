import os

from weir import Job, WatermarkStrategy, agg, sinks, sources, windows

# the broker: localhost:9092 unless KAFKA_BOOTSTRAP says otherwise
BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")

job = Job("clicks")
(
    job.source(
        sources.kafka(BOOTSTRAP, "clicks", group="weir-clicks"),
        timestamp="ts",  # epoch milliseconds, in the message's JSON
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5_000),
    )
    .key_by("page")
    .window(windows.tumbling(ms=60_000))
    .aggregate("per_minute", views=agg.count(), avg_ms=agg.mean("ms"))
    .sink(sinks.jsonl("results.jsonl"))  # exactly-once: written as checkpoints complete
    .sink(sinks.kafka(BOOTSTRAP, "click-stats"))  # at-least-once, keyed by page
)
