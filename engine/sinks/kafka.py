"""A Kafka topic as a sink: ``kafka://host:port/topic`` (``sinks.kafka(bootstrap, topic)``).

Each record is one JSON message. Window results are keyed by the job key, so a topic compacted
on the key keeps the latest value of each key's windows, and a consumer can upsert on
``(key, start, end)``; results emitted again after a recovery carry the same key and values
(at-least-once). Dead letters and late records have no job key and go unkeyed, partitioned by
the producer. Writes are batched by the producer and flushed with the worker's state flush.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from weir.engine.errors import SinkError, SourceError
from weir.engine.sources.kafka import connect


@dataclass(frozen=True, slots=True)
class KafkaSink:
    bootstrap: str
    topic: str

    def describe(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"

    def prepare(self) -> None:
        """A topic is never truncated; this checks the broker is reachable instead."""
        from kafka import KafkaConsumer

        try:
            consumer = connect(
                KafkaConsumer, f"sink topic {self.topic}", self.bootstrap, enable_auto_commit=False
            )
        except SourceError as exc:
            raise SinkError(str(exc)) from None
        consumer.close()

    def open(self) -> KafkaSinkWriter:
        return KafkaSinkWriter(self)


class KafkaSinkWriter:
    def __init__(self, spec: KafkaSink) -> None:
        from kafka import KafkaProducer

        self._topic = spec.topic
        try:
            self._producer = connect(
                KafkaProducer,
                f"sink topic {spec.topic}",
                spec.bootstrap,
                linger_ms=5,
                batch_size=256 * 1024,
                acks=1,
                enable_idempotence=False,
                retries=5,
            )
        except SourceError as exc:
            raise SinkError(str(exc)) from None

    def write(self, records: list[dict[str, Any]]) -> None:
        send = self._producer.send
        dumps = orjson.dumps
        opt = orjson.OPT_NON_STR_KEYS
        for r in records:
            key = r.get("key") if isinstance(r, dict) else None
            send(
                self._topic,
                key=None if key is None else str(key).encode(),
                value=dumps(r, default=str, option=opt),
            )

    def flush(self) -> None:
        self._producer.flush(timeout=30)

    def close(self) -> None:
        self._producer.flush(timeout=30)
        self._producer.close(timeout=10)


def from_url_parts(netloc: str, path: str, url: str) -> KafkaSink:
    topic = path.lstrip("/")
    if not netloc or not topic or "/" in topic:
        raise SinkError(f"sink {url!r}: use kafka://host:port/topic")
    return KafkaSink(netloc, topic)
