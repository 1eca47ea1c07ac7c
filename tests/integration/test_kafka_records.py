"""The lean record path (``engine/sources/kafka_records.py``) reads exactly what kafka-python's
own records hold: the same offsets and values, for keyed and unkeyed records, null values,
headers, long values (multi-byte lengths), gzip batches, and a seek into the middle of a batch."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.kafka_broker import create_topic
from weir.engine.sources.kafka_records import lean


def _fill(bootstrap: str, topic: str) -> int:
    from kafka import KafkaProducer

    sent = 0
    for compression in (None, "gzip"):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            linger_ms=50,
            batch_size=64 * 1024,
            compression_type=compression,
            enable_idempotence=False,
        )
        try:
            for i in range(3_000):
                key = None if i % 3 == 0 and i % 17 else f"k-{i}".encode()
                if i % 17 == 0:
                    value = None
                elif i % 5 == 0:
                    value = ("é" * (i % 400) + str(i)).encode()
                else:
                    value = b'{"i": %d}' % i
                headers = [("h", b"x" * (i % 7)), ("n", b"")] if i % 4 == 0 else None
                producer.send(topic, key=key, value=value, headers=headers, partition=0)
                sent += 1
            producer.flush(30)
        finally:
            producer.close(10)
    return sent


def _read(bootstrap: str, topic: str, fast: bool, start: int, end: int) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    if fast:
        lean(consumer)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, start)
    out: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < end - start:
            assert time.monotonic() < deadline, f"read {len(out)} of {end - start} records"
            for records in consumer.poll(timeout_ms=200, max_records=1000).values():
                out.extend(r if fast else (r.offset, r.value) for r in records)
    finally:
        consumer.close()
    return out


def test_lean_records_equal_the_librarys(kafka_broker: str) -> None:
    topic = f"lean-{os.getpid()}"
    create_topic(kafka_broker, topic, 1)
    sent = _fill(kafka_broker, topic)
    library = _read(kafka_broker, topic, fast=False, start=0, end=sent)
    fast = _read(kafka_broker, topic, fast=True, start=0, end=sent)
    assert [o for o, _ in library] == list(range(sent))
    assert fast == library
    assert any(v is None for _, v in fast) and any(len(v or b"") > 300 for _, v in fast)
    # a restore seeks into the middle of a batch: records before the offset are skipped
    for start in (1, 1_499, 3_001, 4_777):
        assert _read(kafka_broker, topic, fast=True, start=start, end=sent) == library[start:]
