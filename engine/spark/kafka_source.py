"""Kafka offset ranges as a Spark Python data source (``weir-kafka``): one Spark partition per
Kafka partition, each reading its fixed range ``[from, to)`` in offset order with streaming's own
reader (``engine.sources.kafka.KafkaReader``).

    spark.dataSource.register(KafkaRangeSource)
    spark.read.format("weir-kafka").option("bootstrap", "host:9092").option("topic", "ads")
        .option("ranges", '{"0": [0, 1000], "1": [0, 870]}').load()

Rows are the raw records (``SCHEMA``); ``source_batch`` turns them back into what the streaming
source hands the chain, through the same decoding.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from weir.base.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity, resolve
from weir.engine.sources.base import SourceBatch
from weir.engine.sources.kafka import KafkaSource, records_with_metadata

SCHEMA = (
    "partition int, offset long, timestamp long, key binary, value binary, "
    "headers array<struct<key: string, value: binary>>"
)
READ_BATCH = 8192
STALL_S = 60.0  # a partition that yields nothing for this long before its end offset fails


class KafkaRange(InputPartition):
    def __init__(self, partition: int, start: int, stop: int) -> None:
        super().__init__(partition)
        self.partition = partition
        self.start = start
        self.stop = stop


class KafkaRangeSource(DataSource):
    """Options: ``bootstrap``, ``topic``, ``ranges`` (JSON: partition -> [from, to)) and the
    security options (``KafkaSecurity.options()``)."""

    @classmethod
    def name(cls) -> str:
        return "weir-kafka"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        # the driver's settings as they are: no environment of this process is read
        security = resolve({k.lower(): v for k, v in self.options.items()}, {})
        return KafkaRangeReader(self.options["bootstrap"], self.options["topic"],
                                self.options["ranges"], security)  # fmt: skip


class KafkaRangeReader(DataSourceReader):
    def __init__(
        self, bootstrap: str, topic: str, ranges: str, security: KafkaSecurity | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.security = KafkaSecurity() if security is None else security
        self.ranges = {int(p): (int(a), int(b)) for p, (a, b) in json.loads(ranges).items()}

    def partitions(self) -> list[InputPartition]:
        return [KafkaRange(p, a, b) for p, (a, b) in sorted(self.ranges.items()) if b > a]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaRange)
        split = f"{self.topic}/{partition.partition}"
        reader = KafkaSource(self.bootstrap, self.topic, security=self.security).open(
            split, offset=partition.start, stop=partition.stop, lean=False
        )
        progress = time.monotonic()
        try:
            while True:
                msgs = reader.read_messages(READ_BATCH)
                if msgs is None:
                    return
                if msgs:
                    progress = time.monotonic()
                    yield _arrow(msgs)
                elif time.monotonic() - progress > STALL_S:
                    raise SourceError(
                        f"Kafka partition {split} gave nothing for {STALL_S:g} s at offset "
                        f"{reader.offset()}, before the range's end {partition.stop}; was it "
                        "truncated by retention, or is the broker down?"
                    )
        finally:
            reader.close()


def _arrow(msgs: list[Any]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.partition for m in msgs], pa.int32()),
            pa.array([m.offset for m in msgs], pa.int64()),
            pa.array([m.timestamp for m in msgs], pa.int64()),
            pa.array([m.key for m in msgs], pa.binary()),
            pa.array([m.value for m in msgs], pa.binary()),
            pa.array(
                [[{"key": k, "value": v} for k, v in m.headers or ()] for m in msgs],
                pa.list_(header),
            ),
        ],
        names=["partition", "offset", "timestamp", "key", "value", "headers"],
    )


class _Message(NamedTuple):
    """What ``records_with_metadata`` reads of a kafka-python record."""

    value: bytes | None
    key: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int
    partition: int
    offset: int


def source_batch(batch: Any, metadata: bool) -> SourceBatch:
    """Rows of this source as the streaming Kafka source gives them to the chain: raw values
    (decoded and dead-lettered by the chain) or, with ``metadata``, records with ``_kafka``."""
    values = batch.column("value").to_pylist()
    if not metadata:
        return SourceBatch(values, decoded=False)
    msgs = [
        _Message(v, k, [(h["key"], h["value"]) for h in hs or ()], t, p, o)
        for v, k, hs, t, p, o in zip(
            values,
            batch.column("key").to_pylist(),
            batch.column("headers").to_pylist(),
            batch.column("timestamp").to_pylist(),
            batch.column("partition").to_pylist(),
            batch.column("offset").to_pylist(),
            strict=True,
        )
    ]
    return SourceBatch(records_with_metadata(msgs), decoded=True)
