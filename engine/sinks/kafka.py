"""A Kafka topic as a sink: ``kafka://host:port/topic[?delivery_timeout_ms=MS]``
(``sinks.kafka(bootstrap, topic)``), with the TLS and SASL options every Kafka URL takes
(``engine/kafka_security.py``).

Each record is one JSON message. Window results are keyed by the job key, so a topic compacted
on the key keeps the latest value of each key's windows, and a consumer can upsert on
``(key, start, end)``. Dead letters and late records have no job key and go unkeyed.

Delivery is at-least-once, through either client library (``client=confluent``, the default,
or ``client=kafka-python``: ``kafka_producers.py``). The producer waits for every in-sync
replica (``acks=all``) and is idempotent (a retried batch is written once). Every send's result
is kept; ``flush`` (the
worker's periodic flush, and the one before it acknowledges a checkpoint's barrier) waits for
all of them and raises ``SinkError`` if any was not delivered within ``delivery_timeout_ms``
(default 120 000, the producer's own retries included). The worker then fails, and the job
restarts from its last checkpoint, whose barrier came after results that were all
acknowledged: those after it are sent again. Kafka transactions would make the sink
exactly-once (Flink's two-phase commit), but the test broker delivers aborted transactions to
``read_committed`` consumers, so it could not be tested here (README, "Guarantees").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from weir.base.errors import ConfigError, SinkError, SourceError
from weir.base.extras import require
from weir.base.jsonenc import dumps_json
from weir.base.redact import redact_url
from weir.engine.kafka_security import OPTIONS as SECURITY_OPTIONS
from weir.engine.kafka_security import KafkaSecurity, check_netloc, security_of
from weir.engine.sinks.kafka_producers import DeliveryFailed, producer

log = logging.getLogger(__name__)

DELIVERY_TIMEOUT_MS = 120_000


@dataclass(frozen=True, slots=True)
class KafkaSink:
    bootstrap: str
    topic: str
    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS
    security: KafkaSecurity = field(default_factory=KafkaSecurity.from_env)

    def __post_init__(self) -> None:
        require("kafka", f"Kafka sink kafka://{self.bootstrap}/{self.topic}")

    def describe(self) -> str:
        extra = self.security.describe()
        return f"kafka://{self.bootstrap}/{self.topic}" + (f"?{extra}" if extra else "")

    def prepare(self) -> None:
        """A topic is never truncated; this checks the broker is reachable instead."""
        from weir.engine.sources.kafka import KafkaSource

        try:
            KafkaSource(self.bootstrap, self.topic, security=self.security).reachable(
                f"sink topic {self.topic}"
            )
        except SourceError as exc:
            raise SinkError(str(exc)) from None

    def open(self) -> KafkaSinkWriter:
        return KafkaSinkWriter(self)


class KafkaSinkWriter:
    def __init__(self, spec: KafkaSink) -> None:
        self._spec = spec
        try:
            self._producer = producer(
                spec.bootstrap, spec.security, spec.topic, spec.delivery_timeout_ms
            )
        except SourceError as exc:
            raise SinkError(str(exc)) from None

    def write(self, records: list[dict[str, Any]]) -> None:
        send = self._producer.send
        try:
            for r in records:
                key = r.get("key") if isinstance(r, dict) else None
                send(None if key is None else str(key).encode(), dumps_json(r))
        except DeliveryFailed as exc:
            raise self._error(str(exc)) from None

    def flush(self) -> None:
        """Wait for every result sent so far; raise if any was not delivered."""
        try:
            self._producer.flush()
        except DeliveryFailed as exc:
            raise self._error(str(exc)) from None

    def _error(self, what: str) -> SinkError:
        spec = self._spec
        return SinkError(
            f"sink kafka://{spec.bootstrap}/{spec.topic}: {what}; the job restarts from its last "
            "checkpoint and sends the results after it again (raise delivery_timeout_ms in the "
            "sink URL to wait longer for the broker)"
        )

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._producer.close()


def from_url_parts(netloc: str, path: str, url: str, options: dict[str, str]) -> KafkaSink:
    topic = path.lstrip("/")
    shown = redact_url(url)
    if not netloc or not topic or "/" in topic:
        raise SinkError(f"sink {shown!r}: use kafka://host:port/topic")
    try:
        check_netloc(url, netloc)
        security = security_of(url, options)
    except ConfigError as exc:
        raise SinkError(f"sink {exc}") from None
    unknown = sorted(set(options) - {"delivery_timeout_ms"} - set(SECURITY_OPTIONS))
    if unknown:
        raise SinkError(
            f"sink {shown!r}: unknown option {unknown[0]!r}; use delivery_timeout_ms or the "
            f"security options {', '.join(SECURITY_OPTIONS)}"
        )
    raw = options.get("delivery_timeout_ms", str(DELIVERY_TIMEOUT_MS))
    if not raw.isdigit() or int(raw) < 1_000:
        raise SinkError(
            f"sink {shown!r}: delivery_timeout_ms={raw!r} is not valid; use a whole number of "
            "milliseconds, 1000 or more"
        )
    return KafkaSink(netloc, topic, int(raw), security)
