"""A record an expression fails on goes to the dead letters; the reason names the expression."""

from weir import Job, agg, col, sources, testing, windows

job = Job("ratios")
(
    job.source(sources.jsonl("events.jsonl"), timestamp="ts")
    .filter(col("v") / col("n") > 1)
    .key_by(col("user").cast(str))
    .window(windows.tumbling(ms=1_000))
    .aggregate("w", total=agg.sum(col("v") * 2))
)
events = [
    {"ts": 1, "user": 7, "v": 4, "n": 2},
    {"ts": 2, "user": 7, "v": 1, "n": 0},
    {"ts": 3, "v": 4, "n": 1},
    {"ts": 4, "user": 8, "v": "4", "n": 1},
]
dead = [(d["stage"], d["reason"]) for d in testing.run(job, events).dead]
assert dead == [
    ("filter", 'filter (col("v") / col("n") > 1) raised: 1 / 0: division by zero'),
    (
        "filter",
        'filter (col("v") / col("n") > 1) raised: cannot compute str \'4\' / int 1: '
        "arithmetic takes numbers",
    ),
    ("key_by", 'key_by (col("user").cast(str)) is NULL; a key must be a string or an int'),
]  # a batch's filter runs before its key_by: the letters come in that order
