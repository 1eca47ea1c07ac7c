"""A Kafka topic as a source: one split per partition, explicitly assigned (no group rebalancing),
so that checkpoints own the offsets, as in Flink's KafkaSource.

``kafka://host:port/topic?group=NAME&start=earliest|latest|committed|<epoch ms>&end=latest``

- ``start`` (used when no checkpoint holds an offset): the beginning, the end, the group's
  committed offset (the beginning when there is none), or the first offset at or after a time;
- ``end=latest`` makes the source bounded: it stops at each partition's end offset as its first
  fetch reports it (for tests and re-runs over a fixed range);
- ``group`` names the consumer group offsets are committed to after each completed checkpoint,
  for lag monitoring only: restores use the checkpoint's offsets;
- ``metadata=true`` adds ``"_kafka": {"key", "headers", "timestamp", "partition", "offset"}`` to
  each record, so a job can key by the record key or take the Kafka timestamp as event time
  (``timestamp=lambda r: r["_kafka"]["timestamp"]``).

Values are JSON; batches of raw bytes go through the pipeline's batch decode and dead-letter path
like file lines. A broker that cannot be reached when the source opens is retried with backoff;
a broker lost mid-run makes the split wait (kafka-python reconnects) and resume. A broker that
answers but refuses the client's TLS or SASL fails at once, naming what to fix
(``kafka_diagnose``). TLS and SASL settings: ``engine/kafka_security.py`` (URL options such as
``security_protocol=SASL_SSL`` or ``WEIR_KAFKA_*`` variables).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import orjson

from weir.base.errors import SourceError
from weir.base.extras import require
from weir.engine.kafka_security import KafkaSecurity, check_netloc
from weir.engine.sources.base import SourceBatch
from weir.engine.sources.kafka_connect import connect as connect

log = logging.getLogger(__name__)


class PartitionConsumer(Protocol):
    """One partition through one client library (``kafka_confluent``, ``kafka_python``)."""

    def start_at(self, offset: int | None, start: str) -> int:
        """Position at ``offset``, else by the ``start`` mode; the offset it starts at."""
        ...

    def poll(
        self, max_records: int, timeout_ms: int, lean: bool, stop: int | None
    ) -> tuple[Sequence[Any], int]:
        """Up to ``max_records`` records before ``stop``, in offset order (their values when
        ``lean``, else whole records), and the offset after the last (-1 when none)."""
        ...

    def highwater(self) -> int | None: ...

    def position(self) -> int:
        """The offset the client will read next (-1 when it does not know)."""
        ...

    def commit(self, offset: int) -> None: ...

    def close(self) -> None: ...


class Library(NamedTuple):
    """What the source asks of a client library."""

    partitions: Callable[..., set[int] | None]
    offset_bounds: Callable[[str, KafkaSecurity, str, list[int], float], dict[int, tuple[int, int]]]
    partition: Callable[..., PartitionConsumer]


def _client(security: KafkaSecurity) -> Library:
    """The client library ``security`` names, imported only when used."""
    if security.client == "kafka-python":
        from weir.engine.sources import kafka_python as py

        return Library(py.partitions, py.offset_bounds, py.PythonPartition)
    from weir.engine.sources import kafka_confluent as ck

    if security.client == "auto" and security.protocol == "PLAINTEXT":
        from weir.engine.sources import kafka_wire  # a Metadata request, not a librdkafka client

        return Library(kafka_wire.partitions, ck.offset_bounds, ck.ConfluentPartition)
    return Library(ck.partitions, ck.offset_bounds, ck.ConfluentPartition)


def url_parts(url: str) -> tuple[str, str, dict[str, str]] | None:
    """``kafka://host:port/topic?name=value…`` -> ``(host:port, topic, options)``; None when the
    URL does not name one broker and one topic. Streaming sources and backfill inputs share it."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    parts = urlsplit(url)
    topic = unquote(parts.path.lstrip("/"))
    if not parts.netloc or not topic or "/" in topic:
        return None
    check_netloc(url, parts.netloc)
    return parts.netloc, topic, dict(parse_qsl(parts.query, keep_blank_values=True))


@dataclass(frozen=True, slots=True)
class KafkaSource:
    """A Kafka topic (``sources.kafka``): one split per partition, offsets in checkpoints."""

    bootstrap: str
    topic: str
    group: str | None = None
    start: str = "earliest"
    end: str | None = None
    metadata: bool = False
    max_poll_records: int = 8192
    fetch_max_bytes: int = 64 * 1024 * 1024
    max_partition_fetch_bytes: int = 16 * 1024 * 1024
    security: KafkaSecurity = field(default_factory=KafkaSecurity.from_env)

    def __post_init__(self) -> None:
        require("kafka", f"Kafka source kafka://{self.bootstrap}/{self.topic}")
        if self.start not in ("earliest", "latest", "committed") and not self.start.isdigit():
            raise SourceError(
                f"kafka source start={self.start!r}; use earliest, latest, committed or an epoch "
                "time in ms"
            )
        if self.end not in (None, "latest"):
            raise SourceError(f"kafka source end={self.end!r}; use end=latest or leave it out")
        if self.start == "committed" and not self.group:
            raise SourceError("kafka source start=committed needs a group: add ?group=NAME")

    @property
    def bounded(self) -> bool:
        """Whether it ends at each partition's end as first seen (``end=latest``)."""
        return self.end == "latest"

    def describe(self) -> str:
        """The ``kafka://`` URL, with its protocol and mechanism but never a credential."""
        query = f"start={self.start}" + (f"&group={self.group}" if self.group else "")
        if self.security.describe():
            query += f"&{self.security.describe()}"
        return f"kafka://{self.bootstrap}/{self.topic}?{query}"

    def partitions(self) -> list[int]:
        """The topic's partitions, sorted.

        Raises:
            SourceError: the topic does not exist, or no broker answers.
        """
        found = _client(self.security).partitions(self.bootstrap, self.security, self.topic)
        if not found:
            raise SourceError(
                f"Kafka topic {self.topic!r} does not exist on {self.bootstrap}; create it first "
                f"(weir produce creates topics: `topic` {self.topic}) or fix the name"
            )
        return sorted(found)

    def reachable(self, what: str) -> None:
        """Raise ``SourceError`` unless a broker answers this client (retried for a while)."""
        _client(self.security).partitions(self.bootstrap, self.security, self.topic, what)

    def offset_bounds(self, timeout_s: float = 15.0) -> dict[int, tuple[int, int]]:
        """Each partition's first offset and its end: the high watermark a first fetch reports
        (some brokers, Tansu among them, answer ListOffsets(latest) wrongly)."""
        return _client(self.security).offset_bounds(
            self.bootstrap, self.security, self.topic, self.partitions(), timeout_s
        )

    def splits(self, parallelism: int = 1) -> list[str]:
        """``topic/partition`` for each partition."""
        return [f"{self.topic}/{p}" for p in self.partitions()]

    def open(
        self, split: str, offset: Any = None, stop: int | None = None, lean: bool = True
    ) -> KafkaReader:
        """A reader of ``split`` from ``offset`` (else by ``start``); with ``stop``, it ends
        before that offset (the backfill's fixed ranges). ``lean=False`` keeps whole records
        (key, headers, timestamp) even without ``metadata``."""
        topic, _, part = split.rpartition("/")
        return KafkaReader(self, topic, int(part), offset, stop, lean)


def records_with_metadata(msgs: list[Any]) -> list[Any]:
    """Records (``metadata=true``): each value decoded as a JSON object (else
    ``{"_value": text}``), with ``"_kafka": {"key", "headers", "timestamp", "partition",
    "offset"}``. ``msgs`` are whole records (``KafkaRecord``, kafka-python's
    ``ConsumerRecord``) or anything with their attributes."""
    out: list[Any] = []
    for m in msgs:
        try:
            rec = orjson.loads(m.value)
        except orjson.JSONDecodeError:
            rec = None
        if not isinstance(rec, dict):
            rec = {"_value": m.value.decode("utf-8", "replace") if m.value else None}
        rec["_kafka"] = {
            "key": m.key.decode("utf-8", "replace") if m.key is not None else None,
            "headers": {k: v.decode("utf-8", "replace") for k, v in m.headers or []},
            "timestamp": m.timestamp,
            "partition": m.partition,
            "offset": m.offset,
        }
        out.append(rec)
    return out


class KafkaReader:
    """One partition: a client assigned to it alone, positioned at the checkpoint's offset or
    by the ``start`` mode, and bounded by ``stop`` or by ``end=latest``."""

    def __init__(
        self,
        spec: KafkaSource,
        topic: str,
        partition: int,
        offset: Any,
        stop: int | None = None,
        lean: bool = True,
    ) -> None:
        self._spec = spec
        self._split = f"{topic}/{partition}"
        # without metadata only values are read
        self._lean = lean and not spec.metadata
        from weir.engine.sources import kafka_raw  # numpy: not for the CLI's imports

        make = _client(spec.security).partition
        if kafka_raw.applies(spec.security, self._lean, spec.start, offset):
            make = kafka_raw.RawPartition  # record batches as bytes, values as one block
        self._consumer: PartitionConsumer = make(
            spec.bootstrap, spec.security, topic, partition, spec.group,
            spec.fetch_max_bytes, spec.max_partition_fetch_bytes,
        )  # fmt: skip
        try:
            self._next = self._consumer.start_at(
                None if offset is None else int(offset), spec.start
            )
        except BaseException:
            self._consumer.close()
            raise
        self._stop_at: int | None = stop
        self._empty_polls = 0
        self._highwater: int | None = None
        self._opened = time.monotonic()

    def read_batch(self, max_records: int) -> SourceBatch:
        msgs = self._read(max_records)
        if msgs is None:
            return SourceBatch([], decoded=False, end=True, offsets=self._offsets())
        if not msgs:
            return SourceBatch([], decoded=False, offsets=self._offsets())
        if self._lean:
            return SourceBatch(msgs, decoded=False, offsets=self._offsets())
        if self._spec.metadata:
            return SourceBatch(
                records_with_metadata(list(msgs)), decoded=True, offsets=self._offsets()
            )
        return SourceBatch([m.value for m in msgs], decoded=False, offsets=self._offsets())

    def read_messages(self, max_records: int) -> list[Any] | None:
        """The next records, in offset order: whole records (``KafkaRecord`` attributes), or
        values from a lean reader; ``[]`` when none arrived in this poll, ``None`` once a
        bounded reader reached its end."""
        msgs = self._read(max_records)
        if msgs is None or isinstance(msgs, list):
            return msgs
        return [line[:-1] for line in msgs]  # a LineBlock's lines: each value and its \n

    def _read(self, max_records: int) -> Sequence[Any] | None:
        """``read_messages``, but a raw lean reader's values stay the ``LineBlock`` its
        fetch was read into."""
        stop = self._stop_at
        if stop is not None and self._next >= stop:
            return None
        limit = min(max_records, self._spec.max_poll_records)
        if stop is not None:
            limit = min(limit, stop - self._next)
        wait = 0 if self._empty_polls == 0 else 20
        msgs, after = self._consumer.poll(limit, wait, self._lean, stop)
        self._highwater = self._consumer.highwater()
        if self._spec.end == "latest" and stop is None:
            # what this poll returned came from fetches that reported this end or a lower one
            stop = self._end_of_first_fetch()
        if not msgs:
            self._empty_polls += 1
            if stop is not None:
                # transaction markers take offsets that no record has: the client's position
                # moves past them, so a range that ends with one still ends
                self._next = max(self._next, min(stop, self._consumer.position()))
            return []
        self._empty_polls = 0
        self._next = after
        return msgs

    def _end_of_first_fetch(self) -> int | None:
        """The end is the high watermark of the first fetch response: some brokers (Tansu
        among them) answer ListOffsets(latest) wrongly."""
        if self._highwater is None:
            if time.monotonic() - self._opened > 15.0:
                raise SourceError(
                    f"Kafka partition {self._split} did not report its end offset in 15 s"
                )
            return None
        self._stop_at = self._highwater
        return self._stop_at

    def _offsets(self) -> dict[str, Any]:
        return {self._split: self._next}

    def offset(self) -> int:
        return self._next

    def lag(self) -> int | None:
        """Records in the partition not read yet (None until the broker told its end)."""
        if self._highwater is None:
            return None
        return max(0, self._highwater - self._next)

    def commit(self, offset: int) -> None:
        """Commit a completed checkpoint's offset to the group (for lag monitoring only)."""
        if not self._spec.group:
            return
        try:
            self._consumer.commit(int(offset))
        except Exception as exc:  # noqa: BLE001 - monitoring only: never fails the job
            log.warning("commit of %s offset %s to group %s failed: %s", self._split, offset,
                        self._spec.group, exc)  # fmt: skip

    def close(self) -> None:
        self._consumer.close()
