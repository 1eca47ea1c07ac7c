"""The confluent-kafka transport of the Kafka source (``client=confluent``, the default):
librdkafka fetches in its own threads, ahead of the reader, and hands over whole messages;
a lean read takes only their values.

librdkafka resolves a logical start (beginning, end) lazily, at its first fetch, but a
checkpoint needs a number at once: so ``start_at`` asks the broker for the offset first and
assigns the partition at that number. A broker's end offset is the high watermark its fetch
responses report (``cached``): Tansu answers ListOffsets(latest) wrongly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from weir.base.chatter import Chatter
from weir.base.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity
from weir.engine.sources.kafka_connect import cut_at, retrying

log = logging.getLogger(__name__)
# librdkafka's own lines: one a connection attempt of each of its threads (hundreds a second
# for a broker that refuses), so at most one of a kind every 10 s, with a count; weir's own
# retry warnings (kafka_connect.retrying) tell the story
RDKAFKA_LOG = logging.getLogger(f"{__name__}.rdkafka")
CHATTER = Chatter()
RDKAFKA_LOG.addFilter(CHATTER)

TIMEOUT_S = 15.0
# the group librdkafka needs to be named even when no offset is ever committed to it
NO_GROUP = "weir-unused"
# messages a poll takes from librdkafka at a time (``ConfluentPartition.poll``)
CHUNK = 256


class KafkaRecord(NamedTuple):
    """A whole record, with kafka-python's ``ConsumerRecord`` attribute names."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None


def rdkafka_config(bootstrap: str, security: KafkaSecurity) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 15_000,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 2_000,
        # librdkafka's own log lines go to this module's logger, not to stderr, rate-limited
        "logger": RDKAFKA_LOG,
        **security.rdkafka_config(),
    }


def connect(make: Callable[[], Any], what: str, bootstrap: str, security: KafkaSecurity) -> Any:
    """A confluent-kafka client, once the broker answered its metadata request (retried while
    no broker answers)."""
    import confluent_kafka as ck

    try:
        client = make()
    except (ck.KafkaException, ValueError, TypeError) as exc:
        raise SourceError(f"Kafka client settings for {what}: {exc}") from None

    def attempt(timeout_ms: int) -> Any:
        client.list_topics(timeout=timeout_ms / 1000)
        return client

    try:
        return retrying(attempt, (ck.KafkaException,), what, bootstrap, security)
    except SourceError:
        close_client(client)
        raise


def close_client(client: Any) -> None:
    """Close a confluent-kafka client; librdkafka's last lines, which it hands over as it
    closes, are summed up (``CHATTER``)."""
    try:
        client.close()
    finally:
        CHATTER.flush()


def _consumer(bootstrap: str, security: KafkaSecurity, what: str, **conf: Any) -> Any:
    import confluent_kafka as ck

    settings = {
        **rdkafka_config(bootstrap, security),
        "group.id": NO_GROUP,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_uncommitted",  # as kafka-python's default
        "auto.offset.reset": "latest",
        **conf,
    }
    return connect(lambda: ck.Consumer(settings), what, bootstrap, security)


def partitions(
    bootstrap: str, security: KafkaSecurity, topic: str, what: str = ""
) -> set[int] | None:
    consumer = _consumer(bootstrap, security, what or f"topic {topic}")
    try:
        found = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    finally:
        close_client(consumer)
    if found is None or found.error is not None or not found.partitions:
        return None
    return set(found.partitions)


def offset_bounds(
    bootstrap: str, security: KafkaSecurity, topic: str, parts: list[int], timeout_s: float
) -> dict[int, tuple[int, int]]:
    """Each partition's first offset and the high watermark a first fetch reports."""
    import confluent_kafka as ck

    consumer = _consumer(
        bootstrap, security, f"topic {topic}",
        **{"fetch.wait.max.ms": 50, "max.partition.fetch.bytes": 1024},
    )  # fmt: skip
    try:
        tps = [ck.TopicPartition(topic, p) for p in parts]
        first = {tp.partition: consumer.get_watermark_offsets(tp, TIMEOUT_S)[0] for tp in tps}
        consumer.assign([ck.TopicPartition(topic, p, first[p]) for p in parts])
        deadline = time.monotonic() + timeout_s
        while True:
            high = {tp.partition: consumer.get_watermark_offsets(tp, cached=True)[1] for tp in tps}
            if all(h >= 0 for h in high.values()):
                return {p: (int(first[p]), int(high[p])) for p in parts}
            if time.monotonic() > deadline:
                raise SourceError(
                    f"Kafka topic {topic!r} on {bootstrap}: partitions did not report their "
                    f"end offsets in {timeout_s:g} s"
                )
            consumer.consume(1, 0.05)
    except ck.KafkaException as exc:
        raise SourceError(
            f"Kafka topic {topic!r} on {bootstrap}: cannot read its offsets ({exc})"
        ) from None
    finally:
        close_client(consumer)


def _offset(msg: Any) -> int:
    return int(msg.offset())


class ConfluentPartition:
    """One partition through one librdkafka consumer (``PartitionConsumer``)."""

    def __init__(
        self, bootstrap: str, security: KafkaSecurity, topic: str, partition: int,
        group: str | None, fetch_max_bytes: int, max_partition_fetch_bytes: int,
    ) -> None:  # fmt: skip
        import confluent_kafka as ck

        self._split = f"{topic}/{partition}"
        self._tp = ck.TopicPartition(topic, partition)
        # unbound methods, mapped over a batch in C: no Python frame per message
        self._error_of: Callable[[Any], Any] = ck.Message.error
        self._value_of: Callable[[Any], bytes | None] = ck.Message.value
        self._consumer = _consumer(
            bootstrap, security, f"partition {self._split}",
            **{
                "group.id": group or NO_GROUP,
                "fetch.max.bytes": fetch_max_bytes,
                "max.partition.fetch.bytes": max_partition_fetch_bytes,
                # what librdkafka fetches ahead of the reader: about one fetch
                "queued.max.messages.kbytes": max(1024, max_partition_fetch_bytes // 1024),
                "fetch.wait.max.ms": 50,
            },
        )  # fmt: skip

    def start_at(self, offset: int | None, start: str) -> int:
        import confluent_kafka as ck

        c, tp = self._consumer, self._tp
        at: int
        if offset is not None:
            at = int(offset)
        elif start in ("earliest", "latest"):
            low, high = c.get_watermark_offsets(tp, TIMEOUT_S)
            at = low if start == "earliest" else high
        elif start == "committed":
            at = c.committed([tp], timeout=TIMEOUT_S)[0].offset
            if at < 0:  # no committed offset: the beginning
                at = c.get_watermark_offsets(tp, TIMEOUT_S)[0]
        else:
            wanted = ck.TopicPartition(tp.topic, tp.partition, int(start))
            at = c.offsets_for_times([wanted], timeout=TIMEOUT_S)[0].offset
            if at < 0:  # nothing at or after that time: the end
                at = c.get_watermark_offsets(tp, TIMEOUT_S)[1]
        c.assign([ck.TopicPartition(tp.topic, tp.partition, int(at))])
        return int(at)

    def poll(
        self, max_records: int, timeout_ms: int, lean: bool, stop: int | None
    ) -> tuple[list[Any], int]:
        """Up to ``max_records`` records, taken from librdkafka ``CHUNK`` at a time: the first
        take waits up to ``timeout_ms``, the next ones take what is queued, until one comes
        back short. Each chunk's ``Message`` objects are dropped before the next is taken,
        so the allocator reuses memory still in the cache: reading 1M values from 4
        partitions this way took 0.50-0.55 CPU-s against 0.73-0.74 with one ``consume(8192)``
        a poll (the bare consumer: 0.5 against 0.8-0.95; ``benchmarks/kafka_bench.py``)."""
        out: list[Any] = []
        last = -1
        wait = timeout_ms / 1000
        while len(out) < max_records:
            want = min(CHUNK, max_records - len(out))
            msgs = self._consumer.consume(want, wait)
            wait = 0
            full = len(msgs) == want
            if not msgs:
                break
            if list(map(self._error_of, msgs)).count(None) != len(msgs):
                msgs = self._without_errors(msgs)
            kept = cut_at(msgs, stop, _offset) if msgs else msgs
            if kept:
                last = kept[-1].offset() + 1
                out += map(self._value_of, kept) if lean else self._records(kept)
            if not full or len(kept) < len(msgs):  # drained, or reached ``stop``
                break
        return out, last

    def _records(self, msgs: list[Any]) -> list[KafkaRecord]:
        part = self._tp.partition
        return [
            KafkaRecord(part, m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers())
            for m in msgs
        ]

    def _without_errors(self, msgs: list[Any]) -> list[Any]:
        """Messages that are records; a fatal error fails the source, others (a broker lost
        for a while: librdkafka reconnects) are logged."""
        for m in msgs:
            err = m.error()
            if err is None:
                continue
            if err.fatal():
                raise SourceError(f"Kafka partition {self._split}: {err.str()}")
            log.warning("kafka partition=%s error=%s", self._split, err.str())
        return [m for m in msgs if m.error() is None]

    def highwater(self) -> int | None:
        high = self._consumer.get_watermark_offsets(self._tp, cached=True)[1]
        return None if high < 0 else int(high)

    def position(self) -> int:
        got = self._consumer.position([self._tp])[0].offset
        return -1 if got is None else int(got)

    def commit(self, offset: int) -> None:
        import confluent_kafka as ck

        tp = ck.TopicPartition(self._tp.topic, self._tp.partition, int(offset))
        self._consumer.commit(offsets=[tp], asynchronous=False)

    def close(self) -> None:
        close_client(self._consumer)
