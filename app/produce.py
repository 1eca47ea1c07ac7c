"""``weir produce``: write a generated workload into a Kafka topic (the load generator).

The events are the generator source's (``engine/sources/generator.py``): the same seed gives the
same events, so a produced topic and a ``generator://`` run can be compared. Each event is keyed
by its id (so one id stays in one partition); the topic is created with ``--partitions`` when it
does not exist. The summary printed at the end is JSON. TLS and SASL come from the
``WEIR_KAFKA_*`` settings (``engine/kafka_security.py``), as for every Kafka client weir makes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import orjson

from weir.app.progress import StatusLine, rate_text
from weir.base.errors import ConfigError, SourceError
from weir.base.extras import require
from weir.engine.kafka_security import KafkaSecurity
from weir.engine.sources.base import SplitReader
from weir.engine.sources.generator import GeneratorSource
from weir.engine.sources.kafka import connect


def ensure_topic(
    bootstrap: str, topic: str, partitions: int, security: KafkaSecurity | None = None
) -> int:
    """Create ``topic`` with ``partitions`` partitions unless it exists; its partition count."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    sec = KafkaSecurity.from_env() if security is None else security
    consumer = connect(KafkaConsumer, f"topic {topic}", bootstrap, sec, enable_auto_commit=False)
    try:
        found = consumer.partitions_for_topic(topic)
        if found:
            return len(found)
        admin = connect(KafkaAdminClient, f"creating topic {topic}", bootstrap, sec)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            found = consumer.partitions_for_topic(topic)
            if found:
                return len(found)
            time.sleep(0.1)
    finally:
        consumer.close()
    raise SourceError(f"topic {topic} was not visible on {bootstrap} 15 s after creating it")


def produce(
    bootstrap: str,
    topic: str,
    *,
    workload: str = "ads",
    rate: float = 0.0,
    keys: int = 1000,
    skew: float = 1.1,
    disorder: int = 0,
    count: int | None = 100_000,
    partitions: int = 4,
    seed: int = 7,
    clock: str = "wall",
    step: float = 1.0,
    progress: bool = True,
    security: KafkaSecurity | None = None,
) -> dict[str, Any]:
    """Send ``count`` events (forever when None) at ``rate`` events/s (0: as fast as possible);
    ``security`` defaults to the ``WEIR_KAFKA_*`` settings."""
    require("kafka", "weir produce into a Kafka topic (without --file)")
    from kafka import KafkaProducer

    if count is not None and count < 0:
        raise ConfigError(f"--count={count} is negative; use 0 or more events")
    spec = GeneratorSource(
        workload=workload, rate=rate, ids=keys, skew=skew, disorder=disorder, seed=seed,
        count=count, clock=clock, step=step, split_count=1,
    )  # fmt: skip
    sec = KafkaSecurity.from_env() if security is None else security
    have = ensure_topic(bootstrap, topic, partitions, sec)
    producer = connect(
        KafkaProducer,
        f"topic {topic}",
        bootstrap,
        sec,
        linger_ms=10,
        batch_size=512 * 1024,
        acks=1,
        enable_idempotence=False,
        max_in_flight_requests_per_connection=5,
    )
    line = StatusLine() if progress else None
    t0 = time.monotonic()
    try:
        sent = _send_all(spec.open("0/1"), producer, topic, line, t0)
    finally:
        producer.flush(timeout=60)
        producer.close(timeout=10)
    seconds = max(1e-9, time.monotonic() - t0)
    if line is not None:
        line.close(rate_text(sent, seconds, topic))
    return {
        "topic": topic,
        "partitions": have,
        "workload": workload,
        "events": sent,
        "seconds": round(seconds, 3),
        "events_per_s": round(sent / seconds),
    }


def _send_all(
    reader: SplitReader, producer: Any, topic: str, line: StatusLine | None, t0: float
) -> int:
    """Every event of ``reader`` into ``topic`` (until Ctrl-C); how many were sent."""
    sent = 0
    try:
        while True:
            batch = reader.read_batch(4096)
            for rec in batch.items:
                producer.send(topic, key=rec["id"].encode(), value=orjson.dumps(rec))
            sent += len(batch.items)
            if line is not None:
                line.show(rate_text(sent, time.monotonic() - t0, topic))
            if batch.end:
                return sent
    except KeyboardInterrupt:
        return sent


def write_file(
    path: str,
    *,
    workload: str,
    keys: int,
    skew: float,
    disorder: int,
    count: int,
    seed: int,
    clock: str,
    step: float = 1.0,
    progress: bool = True,
) -> dict[str, Any]:
    """The same events into a JSONL file (history for ``weir backfill``)."""
    spec = GeneratorSource(
        workload=workload, rate=0, ids=keys, skew=skew, disorder=disorder, seed=seed,
        count=count, clock=clock, step=step, split_count=1,
    )  # fmt: skip
    reader = spec.open("0/1")
    line = StatusLine() if progress else None
    written, t0 = 0, time.monotonic()
    with open(path, "wb") as fh:
        while True:
            batch = reader.read_batch(8192)
            fh.write(b"".join(orjson.dumps(r) + b"\n" for r in batch.items))
            written += len(batch.items)
            if line is not None:
                line.show(rate_text(written, time.monotonic() - t0, path))
            if batch.end:
                break
    if line is not None:
        line.close(rate_text(written, time.monotonic() - t0, path))
    return {"file": path, "workload": workload, "events": written}


def main(args: Any) -> int:
    if args.file:
        if not args.count:
            raise ConfigError("--file needs a --count of events (a file cannot be endless)")
        summary = write_file(
            args.file, workload=args.workload, keys=args.keys, skew=args.skew,
            disorder=args.disorder, count=args.count, seed=args.seed, clock=args.clock,
            step=args.step_ms,
        )  # fmt: skip
        print(json.dumps(summary))
        return 0
    summary = produce(
        args.bootstrap,
        args.topic,
        workload=args.workload,
        rate=args.rate,
        keys=args.keys,
        skew=args.skew,
        disorder=args.disorder,
        count=None if args.count == 0 else args.count,
        partitions=args.partitions,
        seed=args.seed,
        clock=args.clock,
        step=args.step_ms,
    )
    print(json.dumps(summary))
    return 0
