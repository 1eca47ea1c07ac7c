"""Kafka consume rates, side by side in one run on one topic (issue 5): the bare client weir uses
by default, confluent-kafka (one consumer, every partition; with and without JSON decoding),
against weir reading the same topic into a tumbling count+sum per key at parallelism 1 and 2.
Goal: weir >= 80% of the bare client. The broker is Tansu (tests/support/broker.py) on loopback.
Why confluent-kafka is weir's default client: ``docs/decisions/0001-kafka-client.md``."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.runs import timed_run
from tests.support.broker import tansu
from weir.app.produce import produce

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("kbench")
(
    job.source(sources.kafka({bootstrap!r}, {topic!r}, end="latest"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", n=agg.count(), total=agg.sum("value"))
)
"""


def bare_confluent_consumer(bootstrap: str, topic: str) -> Any:
    """confluent-kafka's consumer alone (the client floor), assigned every partition of
    ``topic`` from its start, with the fetch sizes weir's source uses."""
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.wait.max.ms": 50,
        }
    )  # fmt: skip
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
    return consumer


def bare_consumer(bootstrap: str, topic: str, events: int, decode: bool) -> dict[str, Any]:
    consumer = bare_confluent_consumer(bootstrap, topic)
    n = 0
    t0 = time.perf_counter()
    while n < events:
        msgs = consumer.consume(8192, 0.1)
        n += len(msgs)
        if decode:
            for m in msgs:
                orjson.loads(m.value() or b"null")
    seconds = time.perf_counter() - t0
    consumer.close()
    return {"events": n, "seconds": round(seconds, 3), "events_per_s": round(n / seconds)}


def measure(workdir: Path, events: int = 200_000, keys: int = 10_000) -> dict[str, Any]:
    with tansu(workdir) as bootstrap:
        topic = "kbench"
        produced = produce(
            bootstrap, topic, count=events, keys=keys, partitions=4, clock="synthetic",
            progress=False,
        )  # fmt: skip
        job = workdir / "kafka_job.py"
        job.write_text(JOB.format(bootstrap=bootstrap, topic=topic))
        bare = bare_consumer(bootstrap, topic, produced["events"], decode=False)
        bare_json = bare_consumer(bootstrap, topic, produced["events"], decode=True)
        p1 = timed_run(job, workdir / "k-p1", 1)
        p2 = timed_run(job, workdir / "k-p2", 2)
    best = max(p1["events_per_s"], p2["events_per_s"])
    return {
        "events": produced["events"],
        "partitions": produced["partitions"],
        "produce_events_per_s": produced["events_per_s"],
        "bare_confluent_events_per_s": bare["events_per_s"],
        "bare_confluent_json_events_per_s": bare_json["events_per_s"],
        "weir_p1_events_per_s": p1["events_per_s"],
        "weir_p2_events_per_s": p2["events_per_s"],
        "weir_p1_over_bare": round(p1["events_per_s"] / bare["events_per_s"], 2),
        "weir_best_over_bare": round(best / bare["events_per_s"], 2),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(measure(Path(tempfile.mkdtemp(prefix="weir-kafka-bench-"))), indent=2))
