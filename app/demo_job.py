"""The demo job (``weir demo``): impressions per ad in 10 s tumbling windows, on live ad events."""

from __future__ import annotations

from weir import Job, WatermarkStrategy, agg, sources, windows

job = Job("ad-stats", max_parallelism=128)
(
    job.source(
        sources.generator("ads", rate=2000, ids=1000, skew=1.1, disorder=1500),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000),
    )
    .filter(lambda e: e["event"] == "impression")
    .key_by("id")
    .window(windows.tumbling(ms=10_000), allowed_lateness_ms=5_000)
    .aggregate(
        "impressions",
        count=agg.count(),
        total=agg.sum("value"),
        max_value=agg.max("value"),
        mean_value=agg.mean("value"),
    )
)
