"""A job written with expressions: every step the columnar loop can compile."""

from weir import Job, WatermarkStrategy, agg, col, sources, testing, when, windows

job = Job("ad-stats")
(
    job.source(
        sources.jsonl("events.jsonl"),
        timestamp=col("ts_s") * 1000,  # seconds in the data, epoch ms in weir
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000),
    )
    .filter((col("event") == "impression") & col("id").str.starts_with("ad-"))
    .with_columns(net=col("price") - col("fee").fill_null(0))
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate(
        "impressions",
        n=agg.count(),
        users=agg.count(col("user")),  # records whose user is not NULL
        revenue=agg.sum(col("net") * 2),
        top=agg.max(when(col("net") > 5).then(col("net")).otherwise(0)),
    )
)

events = [
    {"id": "ad-1", "event": "impression", "ts_s": 1, "price": 4, "fee": 1, "user": "u1"},
    {"id": "ad-1", "event": "impression", "ts_s": 2, "price": 9},
    {"id": "ad-1", "event": "click", "ts_s": 3, "price": 100},
    {"id": "x-2", "event": "impression", "ts_s": 4, "price": 1},
]
result = testing.run(job, events)
assert result.results == [
    {"op": "impressions", "key": "ad-1", "start": 0, "end": 10_000, "n": 2, "users": 1,
     "revenue": 24, "top": 9, "final": True},
]  # fmt: skip
assert result.dead == []
