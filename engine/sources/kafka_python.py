"""The kafka-python transport of the Kafka source (``client=kafka-python``), through the
library's public API only: ``KafkaConsumer`` assigned to one partition, its records as they
come (``ConsumerRecord``: offset, value, key, headers, timestamp, partition)."""

from __future__ import annotations

import time
from typing import Any

from weir.base.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity
from weir.engine.sources.kafka_connect import connect, cut_at


def partitions(
    bootstrap: str, security: KafkaSecurity, topic: str, what: str = ""
) -> set[int] | None:
    from kafka import KafkaConsumer

    consumer = connect(
        KafkaConsumer, what or f"topic {topic}", bootstrap, security, enable_auto_commit=False
    )
    try:
        found: set[int] | None = consumer.partitions_for_topic(topic)
        return found
    finally:
        consumer.close()


def offset_bounds(
    bootstrap: str, security: KafkaSecurity, topic: str, parts: list[int], timeout_s: float
) -> dict[int, tuple[int, int]]:
    """Each partition's first offset and the high watermark a first fetch reports."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    tps = [TopicPartition(topic, p) for p in parts]
    consumer = connect(
        KafkaConsumer, f"topic {topic}", bootstrap, security,
        enable_auto_commit=False, fetch_max_wait_ms=50, max_partition_fetch_bytes=1024,
    )  # fmt: skip
    try:
        consumer.assign(tps)
        first = consumer.beginning_offsets(tps)
        for tp in tps:
            consumer.seek(tp, first[tp])
        deadline = time.monotonic() + timeout_s
        while any(consumer.highwater(tp) is None for tp in tps):
            if time.monotonic() > deadline:
                raise SourceError(
                    f"Kafka topic {topic!r} on {bootstrap}: partitions did not report their "
                    f"end offsets in {timeout_s:g} s"
                )
            consumer.poll(timeout_ms=50, max_records=1)
        return {tp.partition: (int(first[tp]), int(consumer.highwater(tp))) for tp in tps}
    except KafkaError as exc:
        raise SourceError(
            f"Kafka topic {topic!r} on {bootstrap}: cannot read its offsets "
            f"({type(exc).__name__}: {exc})"
        ) from None
    finally:
        consumer.close()


def _offset(record: Any) -> int:
    return int(record.offset)


class PythonPartition:
    """One partition through one ``KafkaConsumer`` (``PartitionConsumer``)."""

    def __init__(
        self, bootstrap: str, security: KafkaSecurity, topic: str, partition: int,
        group: str | None, fetch_max_bytes: int, max_partition_fetch_bytes: int,
    ) -> None:  # fmt: skip
        from kafka import KafkaConsumer, TopicPartition

        self._tp = TopicPartition(topic, partition)
        self._consumer = connect(
            KafkaConsumer,
            f"partition {topic}/{partition}",
            bootstrap,
            security,
            group_id=group,
            enable_auto_commit=False,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_wait_ms=50,
            session_timeout_ms=6_000,
        )
        self._consumer.assign([self._tp])

    def start_at(self, offset: int | None, start: str) -> int:
        c, tp = self._consumer, self._tp
        if offset is not None:
            c.seek(tp, int(offset))
        elif start == "earliest":
            c.seek_to_beginning(tp)
        elif start == "latest":
            c.seek_to_end(tp)
        elif start == "committed":
            committed = c.committed(tp)
            if committed is None:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, committed)
        else:
            found = c.offsets_for_times({tp: int(start)}).get(tp)
            if found is None:
                c.seek_to_end(tp)
            else:
                c.seek(tp, found.offset)
        return int(c.position(tp))

    def poll(
        self, max_records: int, timeout_ms: int, lean: bool, stop: int | None
    ) -> tuple[list[Any], int]:
        msgs = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records).get(self._tp)
        if not msgs:
            return [], -1
        msgs = cut_at(msgs, stop, _offset)
        if not msgs:
            return [], -1
        last = int(msgs[-1].offset) + 1
        return ([m.value for m in msgs] if lean else msgs), last

    def highwater(self) -> int | None:
        high = self._consumer.highwater(self._tp)
        return None if high is None else int(high)

    def position(self) -> int:
        return int(self._consumer.position(self._tp))

    def commit(self, offset: int) -> None:
        from kafka.structs import OffsetAndMetadata

        self._consumer.commit({self._tp: OffsetAndMetadata(int(offset), "", -1)})

    def close(self) -> None:
        self._consumer.close(autocommit=False)
