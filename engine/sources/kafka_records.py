"""A lean record path for kafka-python's fetcher: ``(offset, value)`` pairs instead of
``ConsumerRecord`` objects.

kafka-python parses every record of a fetched batch into a ``DefaultRecord`` (key, value,
headers, timestamp, checksum) and then a ``ConsumerRecord``; at about 6 µs a record that is most
of what consuming costs. A source that needs only the values (``metadata=false``) swaps this
class in for its consumer's ``Fetcher.PartitionRecords``: batches still come from the library
(fetch sessions, CRC-32C checks, decompression, positions, errors), and only the per-record walk
is replaced by a loop that reads offset deltas and values and skips the rest.

Record format v2 (``DefaultRecordBatch``) without transactions takes the lean loop; legacy
message sets, ``read_committed`` consumers and control batches take the library's own path, so
nothing changes for them. kafka-python is held below 3.1 (pyproject) and to one version by
constraints.txt, because this reads batch fields (``_buffer``, ``_pos``) that are not its public
API; ``tests/integration/test_kafka_records.py`` checks the two paths agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.util import decode_varint


class ValueRecords(Fetcher.PartitionRecords):  # type: ignore[misc]
    """Yields ``(offset, value bytes | None)`` for each record at or after the fetch offset."""

    def _maybe_skip_record(self, record: tuple[int, bytes | None]) -> bool:
        return bool(record[0] < self.fetch_offset)

    def _unpack_records(
        self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
    ) -> Iterator[tuple[int, bytes | None]]:
        from kafka.consumer.fetcher import IsolationLevel

        if self.isolation_level == IsolationLevel.READ_COMMITTED:
            for rec in super()._unpack_records(tp, records, key_deserializer, value_deserializer):
                yield rec.offset, rec.value
            return
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(
                    f"Record batch for partition {tp} at offset {batch.base_offset} failed its "
                    "CRC check"
                )
            if batch.magic < 2:  # a legacy message set: the library's records
                for rec in batch:
                    self.next_fetch_offset = rec.offset + 1
                    yield rec.offset, rec.value
            elif batch.is_control_batch:
                self.next_fetch_offset = batch.next_offset
            else:
                yield from self._values(batch)
            batch = records.next_batch()
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()

    def _values(self, batch: Any) -> Iterator[tuple[int, bytes | None]]:
        batch._maybe_uncompress()
        buf = batch._buffer
        view = memoryview(buf)
        pos = batch._pos
        base = batch.base_offset
        # The varints are zigzag-coded; each is read inline with a one-byte fast path (a call
        # per varint costs more than the rest of the loop).
        for _ in range(batch._num_records):
            # Record => Length Attributes(int8) TimestampDelta OffsetDelta Key Value Headers
            raw = buf[pos]
            if raw & 0x80:
                length, pos = decode_varint(buf, pos)
            else:
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            end = pos + length
            pos += 1  # attributes
            while buf[pos] & 0x80:  # timestamp delta: not needed
                pos += 1
            raw = buf[pos + 1]
            if raw & 0x80:
                offset_delta, pos = decode_varint(buf, pos + 1)
            else:
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            raw = buf[pos]
            if raw & 0x80:
                key_len, pos = decode_varint(buf, pos)
            else:
                key_len, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            if key_len > 0:
                pos += key_len
            raw = buf[pos]
            if raw & 0x80:
                value_len, pos = decode_varint(buf, pos)
            else:
                value_len, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            offset = base + offset_delta
            self.next_fetch_offset = offset + 1
            yield offset, (bytes(view[pos : pos + value_len]) if value_len >= 0 else None)
            pos = end
        if pos != len(buf):
            raise CorruptRecordError(
                f"Record batch at offset {base} has {len(buf) - pos} bytes after its last record"
            )


def lean(consumer: Any) -> Any:
    """Make ``consumer`` (a ``KafkaConsumer``) return ``(offset, value)`` pairs from ``poll``."""
    consumer._fetcher.PartitionRecords = ValueRecords
    return consumer
