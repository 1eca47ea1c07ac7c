"""map_batch and filter_batch: a function over a batch of columns (a dict of numpy arrays)."""

import numpy as np

from weir import Job, agg, sources, testing, windows


def spend(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    # int fields arrive as int64 arrays, strings and mixed fields as object arrays
    return {**batch, "cents": batch["price"] * 100 + batch["extra"]}


job = Job("batches")
(
    job.source(sources.jsonl("events.jsonl"), timestamp="ts")
    .filter_batch(lambda b: b["price"] > 0)
    .map_batch(spend)
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("w", cents=agg.sum("cents"))
)
events = [
    {"id": "a", "ts": 1, "price": 2, "extra": 5},
    {"id": "a", "ts": 2, "price": 0, "extra": 1},
    {"id": "a", "ts": 3, "price": 1, "extra": 0},
]
assert [r["cents"] for r in testing.run(job, events, batch_size=2).results] == [305]
