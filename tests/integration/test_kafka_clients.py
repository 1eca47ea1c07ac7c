"""Both Kafka client libraries behind the source and the sink read and write the same thing
(``client=confluent``, the default, and ``client=kafka-python``): the same offsets, values,
keys, headers and timestamps, for null and long values and gzip batches; a restore that seeks
into the middle of a batch; a bounded read that ends on a transaction marker; and the sink's
records, as kafka-python reads them back. The client benchmark runs at a small size."""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest

from tests.support.kafka_broker import create_topic, read_topic
from weir.engine.kafka_security import CLIENTS, KafkaSecurity
from weir.engine.sinks.kafka import KafkaSink
from weir.engine.sources.kafka import KafkaSource

SENT = 3_000


def _fill(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    for compression in (None, "gzip"):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=50, batch_size=64 * 1024,
            compression_type=compression, enable_idempotence=False,
        )  # fmt: skip
        try:
            for i in range(SENT // 2):
                key = None if i % 3 == 0 and i % 17 else f"k-{i}".encode()
                value = None if i % 17 == 0 else ("é" * (i % 400) + str(i)).encode()
                headers = [("h", b"x" * (i % 7)), ("n", b"")] if i % 4 == 0 else []
                producer.send(topic, key=key, value=value, headers=headers, partition=0,
                              timestamp_ms=1_700_000_000_000 + i)  # fmt: skip
            producer.flush(30)
        finally:
            producer.close(10)


@pytest.fixture(scope="module")
def filled(kafka_broker: str) -> str:
    topic = f"clients-{os.getpid()}"
    create_topic(kafka_broker, topic, 1)
    _fill(kafka_broker, topic)
    return topic


def _read(bootstrap: str, topic: str, client: str, lean: bool, offset: int = 0) -> list[Any]:
    source = KafkaSource(bootstrap, topic, end="latest", security=KafkaSecurity(client=client))
    reader = source.open(f"{topic}/0", offset=offset, lean=lean)
    out: list[Any] = []
    try:
        while (msgs := reader.read_messages(1_000)) is not None:
            out += msgs
        assert reader.offset() == SENT and reader.lag() == 0
    finally:
        reader.close()
    return out


def _whole(r: Any) -> tuple[Any, ...]:
    headers = [(k, bytes(v)) for k, v in r.headers or []]
    return (r.partition, r.offset, r.timestamp, r.key, r.value, headers)


def test_both_clients_read_the_same_records(kafka_broker: str, filled: str) -> None:
    whole = {c: [_whole(r) for r in _read(kafka_broker, filled, c, lean=False)] for c in CLIENTS}
    assert [r[1] for r in whole["confluent"]] == list(range(SENT))
    assert whole["confluent"] == whole["kafka-python"]
    values = [r[4] for r in whole["confluent"]]
    assert any(v is None for v in values) and any(len(v or b"") > 300 for v in values)
    for client in CLIENTS:
        assert _read(kafka_broker, filled, client, lean=True) == values
        # a restore seeks into the middle of a batch: records before the offset are skipped
        for start in (1, 1_499, 2_777):
            got = _read(kafka_broker, filled, client, lean=True, offset=start)
            assert got == values[start:], (client, start)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_bounded_read_ends_on_a_transaction_marker(kafka_broker: str, client: str) -> None:
    """A committed transaction ends with a marker at an offset no record has: the reader still
    reaches the partition's end."""
    from kafka import KafkaProducer

    topic = f"txn-{client}-{os.getpid()}"
    create_topic(kafka_broker, topic, 1)
    producer = KafkaProducer(bootstrap_servers=kafka_broker, transactional_id=topic)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(50):
            producer.send(topic, value=b'{"i": %d}' % i, partition=0)
        producer.commit_transaction()
    finally:
        producer.close(10)
    source = KafkaSource(kafka_broker, topic, end="latest", security=KafkaSecurity(client=client))
    reader = source.open(f"{topic}/0")
    values: list[Any] = []
    try:
        for _ in range(2_000):
            batch = reader.read_batch(100)
            values += batch.items
            if batch.end:
                break
        assert batch.end, f"read {len(values)} records, stuck at offset {reader.offset()}"
    finally:
        reader.close()
    assert [orjson.loads(v)["i"] for v in values] == list(range(50))
    assert reader.offset() == 51  # past the marker


@pytest.mark.parametrize("client", CLIENTS)
def test_the_sink_delivers_keyed_json_records(kafka_broker: str, client: str) -> None:
    topic = f"sink-{client}-{os.getpid()}"
    create_topic(kafka_broker, topic, 2)
    sink = KafkaSink(kafka_broker, topic, security=KafkaSecurity(client=client))
    sink.prepare()
    writer = sink.open()
    records = [{"key": f"k{i % 7}", "start": i, "count": i} for i in range(2_000)]
    writer.write(records[:1_000])
    writer.flush()
    writer.write(records[1_000:] + [{"late": True}])
    writer.close()
    got = read_topic(kafka_broker, topic)
    assert sorted((orjson.loads(m.value) for m in got), key=str) == sorted(
        [*records, {"late": True}], key=str
    )
    assert {m.key for m in got} == {f"k{i}".encode() for i in range(7)} | {None}
