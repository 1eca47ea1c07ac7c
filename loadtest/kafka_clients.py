"""The Kafka client, chosen by measurement (issue 21): kafka-python against confluent-kafka
(librdkafka) on one topic in one run, consuming and producing, with wall time and CPU seconds.

Consume: every variant reads the same topic (``events`` small JSON events in 4 partitions on
Tansu) from the beginning to its end, in a fresh process of its own, so a client's threads and
memory are counted alone: ``cpu_s`` is the process's CPU time (all threads: librdkafka's
fetcher threads too) over the read. ``reader:*`` variants read through weir's source with
that client (``KafkaSource.open`` per partition, ``read_batch`` in turn, as a worker does);
``bare:*`` variants through the client alone, one consumer for every partition, with the same
fetch sizes.

Produce: the sink's settings (``acks=all``, idempotent), ``events`` JSON values of the same
size to a new topic per variant, the time from the first send to the last acknowledgement;
``+txn`` variants commit a transaction every ``TXN_EVERY`` records, as an exactly-once sink
committing at each checkpoint would.

``python -m loadtest.kafka_clients [--events N] [--repeat R]`` prints JSON; each figure is the
best of ``repeat`` runs, and the ratios compare each variant with the first of its kind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from loadtest.broker import tansu
from weir.app.produce import produce

CONSUMERS = ("reader:kafka-python", "reader:confluent", "bare:kafka-python", "bare:confluent")
PRODUCERS = ("kafka-python", "confluent", "kafka-python+txn", "confluent+txn")
TXN_EVERY = 50_000
READ_BATCH = 8192


def _reader_read(bootstrap: str, topic: str, events: int, variant: str) -> int:
    from weir.engine.kafka_security import KafkaSecurity
    from weir.engine.sources.kafka import KafkaSource

    client = variant.partition(":")[2]
    source = KafkaSource(bootstrap, topic, end="latest", security=KafkaSecurity(client=client))
    readers = [source.open(s) for s in source.splits()]
    n = 0
    try:
        live = list(readers)
        while live:
            for reader in list(live):
                batch = reader.read_batch(READ_BATCH)
                n += len(batch.items)
                if batch.end:
                    live.remove(reader)
    finally:
        for reader in readers:
            reader.close()
    return n


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


def _bare_confluent(bootstrap: str, topic: str, events: int) -> int:
    consumer = bare_confluent_consumer(bootstrap, topic)
    n = 0
    try:
        while n < events:
            for m in consumer.consume(READ_BATCH, 0.1):
                if m.error() is None:
                    m.value()
                    n += 1
    finally:
        consumer.close()
    return n


def _bare_kafka_python(bootstrap: str, topic: str, events: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False,
        fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024,
    )  # fmt: skip
    parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    n = 0
    try:
        while n < events:
            for msgs in consumer.poll(timeout_ms=100, max_records=READ_BATCH).values():
                for m in msgs:
                    m.value  # noqa: B018 - the value is what a reader takes
                n += len(msgs)
    finally:
        consumer.close()
    return n


def consume_once(bootstrap: str, topic: str, events: int, variant: str) -> dict[str, Any]:
    """One variant's read of the whole topic, in this process."""
    read: Callable[[], int]
    if variant.startswith("reader:"):
        read = lambda: _reader_read(bootstrap, topic, events, variant)  # noqa: E731
    elif variant == "bare:confluent":
        read = lambda: _bare_confluent(bootstrap, topic, events)  # noqa: E731
    elif variant == "bare:kafka-python":
        read = lambda: _bare_kafka_python(bootstrap, topic, events)  # noqa: E731
    else:
        raise ValueError(f"unknown consume variant {variant!r}; use one of {CONSUMERS}")
    cpu0, t0 = time.process_time(), time.perf_counter()
    n = read()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if n != events:
        raise RuntimeError(f"{variant} read {n} of {events} events")
    return {"events": n, "seconds": seconds, "cpu_s": cpu}


def _values(events: int) -> list[bytes]:
    """The same JSON values for every producer: generated ad events."""
    from weir.engine.sources.generator import GeneratorSource

    reader = GeneratorSource(
        rate=0.0, ids=10_000, count=events, clock="synthetic", split_count=1
    ).open("0/1")
    out: list[bytes] = []
    while len(out) < events:
        out.extend(orjson.dumps(r) for r in reader.read_batch(8192).items)
    return out


def _produce_kafka_python(bootstrap: str, topic: str, values: list[bytes], txn: bool) -> None:
    from kafka import KafkaProducer

    extra = {"transactional_id": f"bench-{topic}"} if txn else {}
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024, acks="all",
        enable_idempotence=True, **extra,
    )  # fmt: skip
    if txn:
        producer.init_transactions()
    for start in range(0, len(values), TXN_EVERY):
        if txn:
            producer.begin_transaction()
        for v in values[start : start + TXN_EVERY]:
            producer.send(topic, value=v)
        if txn:
            producer.commit_transaction()
    producer.flush(120)
    producer.close(10)


def _produce_confluent(bootstrap: str, topic: str, values: list[bytes], txn: bool) -> None:
    import confluent_kafka as ck

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
        "enable.idempotence": True, "batch.size": 1024 * 1024,
    }  # fmt: skip
    if txn:
        conf["transactional.id"] = f"bench-{topic}"
    producer = ck.Producer(conf)
    if txn:
        producer.init_transactions(30)
    failed: list[Any] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for start in range(0, len(values), TXN_EVERY):
        if txn:
            producer.begin_transaction()
        for v in values[start : start + TXN_EVERY]:
            while True:
                try:
                    producer.produce(topic, v, on_delivery=done)
                    break
                except BufferError:  # the local queue is full: serve deliveries, then retry
                    producer.poll(0.01)
            producer.poll(0)
        if txn:
            producer.commit_transaction(60)
    if producer.flush(120) or failed:
        raise RuntimeError(f"confluent produce: {len(failed)} failed, first {failed[:1]}")


def produce_once(bootstrap: str, topic: str, events: int, variant: str) -> dict[str, Any]:
    from weir.app.produce import ensure_topic

    client, _, txn = variant.partition("+")
    if client not in ("kafka-python", "confluent"):
        raise ValueError(f"unknown produce variant {variant!r}; use one of {PRODUCERS}")
    values = _values(events)
    ensure_topic(bootstrap, topic, 4)
    send = _produce_kafka_python if client == "kafka-python" else _produce_confluent
    cpu0, t0 = time.process_time(), time.perf_counter()
    send(bootstrap, topic, values, bool(txn))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"events": events, "seconds": seconds, "cpu_s": cpu}


def _child(args: list[str]) -> dict[str, Any]:
    """Run one variant in a fresh process (``--child``); its JSON line."""
    out = subprocess.run(
        [sys.executable, "-m", "loadtest.kafka_clients", "--child", *args],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{args}: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = min(runs, key=lambda r: r["seconds"])
    return {
        "events_per_s": round(best["events"] / best["seconds"]),
        "seconds": round(best["seconds"], 3),
        "cpu_s": round(best["cpu_s"], 3),
        "events_per_cpu_s": round(best["events"] / max(best["cpu_s"], 1e-9)),
        "runs_events_per_s": [round(r["events"] / r["seconds"]) for r in runs],
    }


def _ratios(table: dict[str, dict[str, Any]]) -> None:
    base = next(iter(table.values()))
    for row in table.values():
        row["rate_ratio"] = round(row["events_per_s"] / base["events_per_s"], 2)
        row["cpu_ratio"] = round(row["cpu_s"] / base["cpu_s"], 2)


def measure(
    workdir: Path,
    events: int = 1_000_000,
    repeat: int = 2,
    consumers: tuple[str, ...] = CONSUMERS,
    producers: tuple[str, ...] = PRODUCERS,
) -> dict[str, Any]:
    with tansu(workdir) as bootstrap:
        topic = "clients"
        produced = produce(
            bootstrap, topic, count=events, keys=10_000, partitions=4, clock="synthetic",
            progress=False,
        )  # fmt: skip
        consume: dict[str, dict[str, Any]] = {}
        for variant in consumers:
            runs = [
                _child(["consume", variant, bootstrap, topic, str(events)]) for _ in range(repeat)
            ]
            consume[variant] = _best(runs)
        producing: dict[str, dict[str, Any]] = {}
        for variant in producers:
            runs = [
                _child(["produce", variant, bootstrap, f"p-{variant}-{i}", str(events)])
                for i in range(repeat)
            ]
            producing[variant] = _best(runs)
    _ratios(consume)
    _ratios(producing)
    return {
        "events": produced["events"],
        "partitions": produced["partitions"],
        "consume": consume,
        "produce": producing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.kafka_clients")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--consumers", default=",".join(CONSUMERS))
    parser.add_argument("--producers", default=",".join(PRODUCERS))
    parser.add_argument("--child", nargs=5, metavar=("KIND", "VARIANT", "BOOT", "TOPIC", "N"))
    args = parser.parse_args()
    if args.child:
        kind, variant, bootstrap, topic, n = args.child
        once = consume_once if kind == "consume" else produce_once
        print(json.dumps(once(bootstrap, topic, int(n), variant)))
        return
    workdir = Path(tempfile.mkdtemp(prefix="weir-kafka-clients-"))
    result = measure(
        workdir, args.events, args.repeat,
        tuple(v for v in args.consumers.split(",") if v),
        tuple(v for v in args.producers.split(",") if v),
    )  # fmt: skip
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
