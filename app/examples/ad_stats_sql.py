"""A SQL query in a Python job: the source is declared in Python, the window in SQL."""

from weir import Job, WatermarkStrategy, sources

job = Job("ad-stats-py-sql")
events = job.source(
    sources.generator("ads", rate=2000, ids=1000, seed=7),
    timestamp="ts",  # the table's time attribute: DESCRIPTOR(ts)
    # SQL's WATERMARK FOR ts AS ts - INTERVAL '2' SECOND: max(ts) - 2 s (the DataStream rule,
    # bounded_out_of_orderness(ms=2_000), is max(ts) - 2 s - 1 ms)
    watermarks=WatermarkStrategy.sql_delay(ms=2_000),
)
job.sql(
    "impressions",
    """
    SELECT id, window_start, window_end, COUNT(*) AS impressions, SUM(`value`) AS total
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    WHERE event = 'impression'
    GROUP BY id, window_start, window_end
    """,
    tables={"events": events},
    allowed_lateness_ms=5_000,
)
