"""The Kafka sink's producer in either client library, with the same settings: every in-sync
replica acknowledges (``acks=all``), idempotent, a send blocks at most the delivery timeout
while the local buffer is full, and ``flush`` reports what was not delivered."""

from __future__ import annotations

import time
from typing import Any, Protocol

from weir.engine.kafka_security import KafkaSecurity

LINGER_MS = 5
BATCH_BYTES = 256 * 1024
REQUEST_TIMEOUT_MS = 15_000


class DeliveryFailed(Exception):
    """What was not delivered, for the sink to name in its ``SinkError``."""


class Producer(Protocol):
    def send(self, key: bytes | None, value: bytes) -> None: ...

    def flush(self) -> None:
        """Wait for every send so far; raise ``DeliveryFailed`` if any was not delivered."""
        ...

    def close(self) -> None: ...


def producer(bootstrap: str, security: KafkaSecurity, topic: str, delivery_ms: int) -> Producer:
    if security.client == "kafka-python":
        return PythonProducer(bootstrap, security, topic, delivery_ms)
    return ConfluentProducer(bootstrap, security, topic, delivery_ms)


class PythonProducer:
    def __init__(
        self, bootstrap: str, security: KafkaSecurity, topic: str, delivery_ms: int
    ) -> None:
        from kafka import KafkaProducer

        from weir.engine.sources.kafka_connect import connect

        self._topic = topic
        self._delivery_ms = delivery_ms
        self._futures: list[Any] = []
        self._producer = connect(
            KafkaProducer, f"sink topic {topic}", bootstrap, security,
            linger_ms=LINGER_MS, batch_size=BATCH_BYTES, acks="all", enable_idempotence=True,
            delivery_timeout_ms=delivery_ms,
            request_timeout_ms=min(REQUEST_TIMEOUT_MS, delivery_ms - LINGER_MS),
            max_block_ms=delivery_ms,
        )  # fmt: skip

    def send(self, key: bytes | None, value: bytes) -> None:
        from kafka.errors import KafkaError

        try:
            self._futures.append(self._producer.send(self._topic, key=key, value=value))
        except KafkaError as exc:  # the buffer stayed full past max_block_ms: no broker answer
            raise DeliveryFailed(f"a send failed: {type(exc).__name__}: {exc}") from None

    def flush(self) -> None:
        from kafka.errors import KafkaTimeoutError

        futures, self._futures = self._futures, []
        if not futures:
            return
        try:
            self._producer.flush(timeout=self._delivery_ms / 1000.0 + 5.0)
        except KafkaTimeoutError as exc:
            raise DeliveryFailed(
                f"{len(futures)} results not acknowledged in time: {exc}"
            ) from None
        failed = [f for f in futures if f.failed()]
        if failed:
            first = failed[0].exception
            raise DeliveryFailed(
                f"{len(failed)} of {len(futures)} results were not delivered "
                f"({type(first).__name__}: {first})"
            )

    def close(self) -> None:
        self._producer.close(timeout=10)


class ConfluentProducer:
    def __init__(
        self, bootstrap: str, security: KafkaSecurity, topic: str, delivery_ms: int
    ) -> None:
        import confluent_kafka as ck

        from weir.engine.sources.kafka_confluent import connect, rdkafka_config

        self._topic = topic
        self._delivery_ms = delivery_ms
        self._sent = 0
        self._failed: list[Any] = []
        settings = {
            **rdkafka_config(bootstrap, security),
            "acks": "all", "enable.idempotence": True, "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES, "delivery.timeout.ms": delivery_ms,
            "request.timeout.ms": min(REQUEST_TIMEOUT_MS, delivery_ms - LINGER_MS),
        }  # fmt: skip
        self._producer = connect(
            lambda: ck.Producer(settings), f"sink topic {topic}", bootstrap, security
        )

    def _done(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._failed.append(err)

    def send(self, key: bytes | None, value: bytes) -> None:
        produce, done = self._producer.produce, self._done
        deadline = 0.0
        while True:
            try:
                produce(self._topic, value, key, on_delivery=done)
                break
            except BufferError:  # the local queue is full: serve deliveries while it drains
                now = time.monotonic()
                deadline = deadline or now + self._delivery_ms / 1000
                if now > deadline:
                    raise DeliveryFailed(
                        f"a send failed: the producer's buffer stayed full for "
                        f"{self._delivery_ms} ms (no broker took its records)"
                    ) from None
                self._producer.poll(0.05)
        self._sent += 1
        if self._sent & 1023 == 0:
            self._producer.poll(0)  # delivery reports, without waiting

    def flush(self) -> None:
        sent, self._sent = self._sent, 0
        if not sent and not self._failed:
            return
        left = self._producer.flush(self._delivery_ms / 1000.0 + 5.0)
        failed, self._failed = self._failed, []
        if left:
            raise DeliveryFailed(f"{left} of {sent} results not acknowledged in time")
        if failed:
            raise DeliveryFailed(
                f"{len(failed)} of {sent} results were not delivered ({failed[0].str()})"
            )

    def close(self) -> None:
        try:
            self._producer.flush(10)
        finally:
            self._producer.close()
