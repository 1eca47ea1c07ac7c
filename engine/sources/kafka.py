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
import os
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from weir.engine.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity, check_netloc
from weir.engine.sources.base import SourceBatch

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 60.0
CONNECT_BACKOFF_S = 0.5


def _client_kwargs(bootstrap: str, security: KafkaSecurity) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "request_timeout_ms": 15_000,
        "reconnect_backoff_ms": 100,
        "reconnect_backoff_max_ms": 2_000,
        **security.client_kwargs(),
    }


def _check_broker(bootstrap: str, security: KafkaSecurity, what: str, first: bool) -> None:
    """Raise when the broker refuses this client's TLS or SASL: retrying would not heal it.

    A TLS client is checked before its first attempt too (once per process and settings):
    kafka-python's TLS handshake has no timeout, so a plaintext listener that waits for more
    bytes instead of closing would hold the attempt for ever."""
    from weir.engine.sources.kafka_diagnose import diagnose

    key = (bootstrap, security)
    if first and (not security.tls or key in _CHECKED):
        return
    reason = diagnose(bootstrap, security)
    if reason is not None:
        raise SourceError(f"{reason} (connecting for {what})")
    if first:
        _CHECKED.add(key)


_CHECKED: set[tuple[str, KafkaSecurity]] = set()


def connect(factory: Any, what: str, bootstrap: str, security: KafkaSecurity, **kwargs: Any) -> Any:
    """Build a kafka-python client, retrying with exponential backoff while no broker answers,
    for up to ``WEIR_KAFKA_CONNECT_TIMEOUT_S`` seconds (default 60). A broker that answers but
    refuses this client's TLS or SASL fails at once, naming what to check."""
    from kafka.errors import KafkaConfigurationError, KafkaError

    budget = float(os.environ.get("WEIR_KAFKA_CONNECT_TIMEOUT_S", CONNECT_TIMEOUT_S))
    deadline = time.monotonic() + budget
    delay = CONNECT_BACKOFF_S
    _check_broker(bootstrap, security, what, first=True)
    attempt = 0
    while True:
        attempt += 1
        # each attempt waits at most half the budget left, so there is time to retry
        left_ms = (deadline - time.monotonic()) * 1000
        per_attempt = int(max(500, min(5_000, left_ms / 2)))
        try:
            # kwargs may override the defaults (a sink's request timeout fits its delivery one)
            return factory(
                **{**_client_kwargs(bootstrap, security), **kwargs},
                bootstrap_timeout_ms=per_attempt,
            )
        except KafkaConfigurationError:
            raise
        except KafkaError as exc:
            _check_broker(bootstrap, security, what, first=False)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SourceError(
                    f"cannot reach the Kafka broker at {bootstrap} for {what} "
                    f"({type(exc).__name__} after {attempt} attempts in {budget:g} s); check the "
                    "host:port in the URL and that the broker is up"
                ) from None
            log.warning(
                "kafka broker %s unreachable for %s (attempt %d); retrying in %.1f s",
                bootstrap,
                what,
                attempt,
                min(delay, left),
            )
            time.sleep(min(delay, left))
            delay = min(delay * 2, 8.0)


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
        return self.end == "latest"

    def describe(self) -> str:
        query = f"start={self.start}" + (f"&group={self.group}" if self.group else "")
        if self.security.describe():
            query += f"&{self.security.describe()}"
        return f"kafka://{self.bootstrap}/{self.topic}?{query}"

    def partitions(self) -> list[int]:
        from kafka import KafkaConsumer

        consumer = connect(
            KafkaConsumer, f"topic {self.topic}", self.bootstrap, self.security,
            enable_auto_commit=False,
        )  # fmt: skip
        try:
            found = consumer.partitions_for_topic(self.topic)
        finally:
            consumer.close()
        if not found:
            raise SourceError(
                f"Kafka topic {self.topic!r} does not exist on {self.bootstrap}; create it first "
                f"(e.g. weir produce --topic {self.topic} --partitions 4) or fix the name"
            )
        return sorted(found)

    def offset_bounds(self, timeout_s: float = 15.0) -> dict[int, tuple[int, int]]:
        """Each partition's first offset and its end: the high watermark a first fetch reports
        (some brokers, Tansu among them, answer ListOffsets(latest) wrongly)."""
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError

        tps = [TopicPartition(self.topic, p) for p in self.partitions()]
        consumer = connect(
            KafkaConsumer, f"topic {self.topic}", self.bootstrap, self.security,
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
                        f"Kafka topic {self.topic!r} on {self.bootstrap}: partitions did not "
                        f"report their end offsets in {timeout_s:g} s"
                    )
                consumer.poll(timeout_ms=50, max_records=1)
            return {tp.partition: (int(first[tp]), int(consumer.highwater(tp))) for tp in tps}
        except KafkaError as exc:
            raise SourceError(
                f"Kafka topic {self.topic!r} on {self.bootstrap}: cannot read its offsets "
                f"({type(exc).__name__}: {exc})"
            ) from None
        finally:
            consumer.close()

    def splits(self, parallelism: int = 1) -> list[str]:
        return [f"{self.topic}/{p}" for p in self.partitions()]

    def open(
        self, split: str, offset: Any = None, stop: int | None = None, lean: bool = True
    ) -> KafkaReader:
        """A reader of ``split`` from ``offset`` (else by ``start``); with ``stop``, it ends
        before that offset (the backfill's fixed ranges). ``lean=False`` keeps kafka-python's
        whole records (key, headers, timestamp) even without ``metadata``."""
        topic, _, part = split.rpartition("/")
        return KafkaReader(self, topic, int(part), offset, stop, lean)


def records_with_metadata(msgs: list[Any]) -> list[Any]:
    """Records (``metadata=true``): each value decoded as a JSON object (else
    ``{"_value": text}``), with ``"_kafka": {"key", "headers", "timestamp", "partition",
    "offset"}``. ``msgs`` are kafka-python records or anything with their attributes."""
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


def _first(record: tuple[int, bytes | None]) -> int:
    return record[0]


def _offset(record: Any) -> int:
    return int(record.offset)


class KafkaReader:
    """One partition: a consumer assigned to it alone, positioned at the checkpoint's offset or
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
        from kafka import KafkaConsumer, TopicPartition

        self._spec = spec
        self._split = f"{topic}/{partition}"
        self._tp = TopicPartition(topic, partition)
        self._consumer = connect(
            KafkaConsumer,
            f"partition {self._split}",
            spec.bootstrap,
            spec.security,
            group_id=spec.group,
            enable_auto_commit=False,
            fetch_max_bytes=spec.fetch_max_bytes,
            max_partition_fetch_bytes=spec.max_partition_fetch_bytes,
            fetch_max_wait_ms=50,
            session_timeout_ms=6_000,
        )
        # without metadata only values are read: the lean record path (kafka_records.py)
        self._lean = lean and not spec.metadata
        self._offset_of = _first if self._lean else _offset
        if self._lean:
            from weir.engine.sources import kafka_records

            kafka_records.lean(self._consumer)
        self._consumer.assign([self._tp])
        self._next = self._position(offset)
        self._stop_at: int | None = stop
        self._empty_polls = 0
        self._highwater: int | None = None
        self._opened = time.monotonic()

    def _position(self, offset: Any) -> int:
        c, tp, start = self._consumer, self._tp, self._spec.start
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

    def read_batch(self, max_records: int) -> SourceBatch:
        msgs = self.read_messages(max_records)
        if msgs is None:
            return SourceBatch([], decoded=False, end=True, offsets=self._offsets())
        if not msgs:
            return SourceBatch([], decoded=False, offsets=self._offsets())
        if self._lean:
            return SourceBatch([m[1] for m in msgs], decoded=False, offsets=self._offsets())
        if self._spec.metadata:
            return SourceBatch(records_with_metadata(msgs), decoded=True, offsets=self._offsets())
        return SourceBatch([m.value for m in msgs], decoded=False, offsets=self._offsets())

    def read_messages(self, max_records: int) -> list[Any] | None:
        """The next records, in offset order: kafka-python's, or ``(offset, value)`` pairs from
        a lean reader; ``[]`` when none arrived in this poll, ``None`` once a bounded reader
        reached its end."""
        stop = self._stop_at
        if stop is not None and self._next >= stop:
            return None
        limit = min(max_records, self._spec.max_poll_records)
        if stop is not None:
            limit = min(limit, stop - self._next)
        wait = 0 if self._empty_polls == 0 else 20
        msgs: list[Any] = self._consumer.poll(timeout_ms=wait, max_records=limit).get(self._tp, [])
        self._highwater = self._consumer.highwater(self._tp)
        if self._spec.end == "latest" and stop is None:
            # the end is the high watermark of the first fetch response: some brokers (Tansu
            # among them) answer ListOffsets(latest) wrongly
            if self._highwater is None:
                if time.monotonic() - self._opened > 15.0:
                    raise SourceError(
                        f"Kafka partition {self._split} did not report its end offset in 15 s"
                    )
            else:
                self._stop_at = stop = int(self._highwater)
        if stop is not None and msgs and self._offset_of(msgs[-1]) >= stop:
            msgs = [m for m in msgs if self._offset_of(m) < stop]
        if not msgs:
            self._empty_polls += 1
            if stop is not None:
                # transaction markers take offsets that no record has: the consumer's position
                # moves past them, so a range that ends with one still ends
                self._next = max(self._next, min(stop, int(self._consumer.position(self._tp))))
            return []
        self._empty_polls = 0
        self._next = self._offset_of(msgs[-1]) + 1
        return msgs

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
        from kafka.structs import OffsetAndMetadata

        try:
            self._consumer.commit({self._tp: OffsetAndMetadata(int(offset), "", -1)})
        except Exception as exc:  # noqa: BLE001 - monitoring only: never fails the job
            log.warning("commit of %s offset %s to group %s failed: %s", self._split, offset,
                        self._spec.group, exc)  # fmt: skip

    def close(self) -> None:
        self._consumer.close(autocommit=False)
