"""Two-input jobs for tests: the job (two sources, a union feeding a tumbling window, a
connected co-process function counting each input per bucket, a window on the first source
alone), a brute-force reference of their results, and an in-process harness that runs the
real chains, routing-free keyed side and operators of one worker, fed batch by batch from
either source in any order.

The reference holds whenever every record is within its own source's bound: then no record is
behind the watermark it arrives under (an operator's watermark is never above any of its
sources'), so no window and no timer depends on how the two inputs interleave.
"""

from __future__ import annotations

import inspect
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from weir import Job, WatermarkStrategy, agg, sources, testing, windows

BOUND_MS = 100
WINDOW_MS = 1_000
BUCKET_MS = 1_000
KEYS = [f"ad-{i}" for i in range(12)]

# the job file of the integration tests (``Buckets`` is pasted in: a job file imports no test
# module): VIEWS, CLICKS, OUT_* are replaced by paths, SLEEP by a pause per first-input record
# (a run long enough to be killed in the middle)
JOB = """
from typing import Any
from weir import Job, WatermarkStrategy, agg, sinks, sources, testing, windows

BUCKET_MS = @BUCKET@
@CLASS@

WM = WatermarkStrategy.bounded_out_of_orderness(ms=@BOUND@)
job = Job("two", max_parallelism=64)
views = job.source(sources.jsonl(@VIEWS@), name="views", watermarks=WM)
clicks = job.source(sources.jsonl(@CLICKS@), name="clicks", watermarks=WM)
(views.union(clicks).key_by("id").window(windows.tumbling(ms=@WINDOW@))
    .aggregate("both", n=agg.count(), total=agg.sum("value")).sink(sinks.jsonl(@OUT_BOTH@)))
(views.connect(clicks).key_by("id", "id").process(Buckets(@SLEEP@), name="ctr")
    .sink(sinks.jsonl(@OUT_CTR@)))
"""


def job_text(views: Path, clicks: Path, out: Path, sleep: float = 0.0) -> str:
    values = {
        "@CLASS@": inspect.getsource(Buckets),
        "@BUCKET@": str(BUCKET_MS),
        "@BOUND@": str(BOUND_MS),
        "@WINDOW@": str(WINDOW_MS),
        "@VIEWS@": repr(str(views)),
        "@CLICKS@": repr(str(clicks)),
        "@OUT_BOTH@": repr(str(out / "both.jsonl")),
        "@OUT_CTR@": repr(str(out / "ctr.jsonl")),
        "@SLEEP@": repr(sleep),
    }
    text = JOB
    for name, value in values.items():
        text = text.replace(name, value)
    return text


class Buckets:
    """A keyed co-process function: counts each input's records per key and bucket in map
    state, keeps running totals in value state (what a query reads), and emits a bucket's
    counts from an event-time timer at its end."""

    def __init__(self, sleep: float = 0.0) -> None:
        self.sleep = sleep

    def _count(self, side: str, event: dict[str, Any], ctx: Any) -> None:
        bucket = event["ts"] // BUCKET_MS
        per = ctx.map(side)
        per.put(str(bucket), per.get(str(bucket), 0) + 1)
        total = ctx.value(f"total_{side}")
        total.set(total.get(0) + 1)
        ctx.register_event_time_timer(bucket * BUCKET_MS + BUCKET_MS - 1)

    def process1(self, event: dict[str, Any], ctx: Any) -> None:
        if self.sleep:
            import time

            time.sleep(self.sleep)
        self._count("views", event, ctx)

    def process2(self, event: dict[str, Any], ctx: Any) -> None:
        self._count("clicks", event, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        bucket = str(timestamp // BUCKET_MS)
        views, clicks = ctx.map("views"), ctx.map("clicks")
        ctx.emit(
            {
                "key": ctx.key,
                "bucket": int(bucket),
                "views": views.get(bucket, 0),
                "clicks": clicks.get(bucket, 0),
            }
        )
        views.remove(bucket)
        clicks.remove(bucket)


def make_job() -> Job:
    """The integration job's graph, plus a window on the first source alone."""
    wm = WatermarkStrategy.bounded_out_of_orderness(ms=BOUND_MS)
    job = Job("two", max_parallelism=64)
    views = job.source(sources.jsonl("/views.jsonl"), name="views", watermarks=wm)
    clicks = job.source(sources.jsonl("/clicks.jsonl"), name="clicks", watermarks=wm)
    tumbling = windows.tumbling(ms=WINDOW_MS)
    views.union(clicks).key_by("id").window(tumbling).aggregate(
        "both", n=agg.count(), total=agg.sum("value")
    )
    views.key_by("id").window(tumbling).aggregate("views_only", n=agg.count())
    views.connect(clicks).key_by("id", "id").process(Buckets(), name="ctr")
    return job


def make_events(n: int, seed: int, step: int) -> list[dict[str, Any]]:
    """Events of one source, each within ``BOUND_MS`` of the largest time before it."""
    rng = random.Random(seed)
    clock, out = 0, []
    for _ in range(n):
        clock += rng.randint(0, step)
        out.append(
            {
                "id": rng.choice(KEYS),
                "ts": clock - rng.randint(0, BOUND_MS),
                "value": rng.randint(0, 9),
            }
        )
    return out


def expected_both(views: Sequence[dict[str, Any]], clicks: Sequence[dict[str, Any]]) -> set[Any]:
    """The union's tumbling windows: (key, start, end, count, sum)."""
    found: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for e in [*views, *clicks]:
        acc = found[(e["id"], e["ts"] - e["ts"] % WINDOW_MS)]
        acc[0] += 1
        acc[1] += e["value"]
    return {(k, s, s + WINDOW_MS, n, t) for (k, s), (n, t) in found.items()}


def expected_ctr(views: Sequence[dict[str, Any]], clicks: Sequence[dict[str, Any]]) -> set[Any]:
    """The co-process function's emissions: (key, bucket, views, clicks)."""
    v = Counter((e["id"], e["ts"] // BUCKET_MS) for e in views)
    c = Counter((e["id"], e["ts"] // BUCKET_MS) for e in clicks)
    return {(k, b, v[(k, b)], c[(k, b)]) for k, b in v.keys() | c.keys()}


def both_rows(results: Sequence[dict[str, Any]]) -> list[Any]:
    return sorted((r["key"], r["start"], r["end"], r["n"], r["total"]) for r in results)


def ctr_rows(results: Sequence[dict[str, Any]]) -> list[Any]:
    return sorted((r["key"], r["bucket"], r["views"], r["clicks"]) for r in results)


class TwoInputHarness:
    """``weir.testing.Harness`` (one worker's chains, the worker's keyed side and operators over
    a real RocksDB) fed by source index: ``feed(source, events)`` is one batch of that source;
    ``keyed`` is its keyed side, for checks of operators' watermarks and idle inputs."""

    def __init__(self, job: Job) -> None:
        self._harness = testing.Harness(job)
        self._names = [s.name for s in job.sources]
        self.keyed = self._harness._keyed

    def results(self, op: str) -> list[Any]:
        return self._harness.by_operator[op]

    def feed(self, source: int, events: list[dict[str, Any]]) -> None:
        self._harness.feed(events, source=self._names[source])

    def finish(self) -> None:
        self._harness.finish()

    def close(self) -> None:
        self._harness.close()

    def __enter__(self) -> TwoInputHarness:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
