"""The raw transport of the Kafka source (issue 38, item 2: "read raw line blocks (files and
Kafka payloads)"): its own plaintext connection to the partition's leader (``kafka_wire``)
fetches record batches as bytes, and the kernels' batch reader (``kernels.kbatch``) turns a
fetch into one block of values, each followed by ``\\n``: a ``LineBlock`` the columnar scanner
reads as it reads a file's, with no Python object per record (decision 0018).

It serves lean reads (values only, no ``metadata``) over PLAINTEXT, when the client is the
default (``client=auto``); every other read takes the confluent transport. One fetch is in
flight while the reader works on the last one (librdkafka fetches ahead the same way).
Control batches (transaction markers) and compaction's gaps move the position past them;
compressed batches are decompressed with the codec Python has (gzip always; lz4, snappy,
zstd when their packages are installed, else a clear error). Offsets are committed to the
group through confluent-kafka, made the first time one is committed.
"""

from __future__ import annotations

import gzip
import logging
import time
from bisect import bisect_left
from typing import Any

import numpy as np

from weir.base.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity
from weir.engine.kernels.kbatch import BATCH_HEAD, DONE, HEADER, OLD_MAGIC
from weir.engine.sources.base import LineBlock
from weir.engine.sources.kafka_wire import (
    FETCH,
    LIST_OFFSETS,
    Wire,
    fetch_answer,
    fetch_request,
    leader,
    list_offsets_answer,
    list_offsets_request,
)

log = logging.getLogger(__name__)
TIMEOUT_S = 15.0
NO_STOP = (1 << 63) - 1
# errors after which the partition's leader is looked up again
_RELOCATE = {3, 5, 6, 74, 75}  # unknown partition, no leader, not leader, fenced/unknown epoch
_OUT_OF_RANGE = 1
_MIB = 1 << 20


def applies(security: KafkaSecurity, lean: bool, start: str, offset: Any) -> bool:
    """Whether the raw transport serves a read: lean, over PLAINTEXT, client left to weir,
    and not from a group's committed offset (which only a group client reads)."""
    return (
        lean
        and security.client == "auto"
        and security.protocol == "PLAINTEXT"
        and (offset is not None or start != "committed")
    )


def decompress(codec: int, data: bytes) -> bytes:
    """A batch's records, decompressed (``codec``: the attributes' low 3 bits).

    Raises:
        SourceError: the codec's package is not installed, or the codec is unknown.
    """
    if codec == 1:
        return gzip.decompress(data)
    names = {2: ("snappy", "cramjam"), 3: ("lz4", "lz4"), 4: ("zstd", "zstandard")}
    name, package = names.get(codec, (f"codec {codec}", ""))
    try:
        if codec == 2:
            import cramjam  # type: ignore[import-not-found]

            return _snappy(cramjam.snappy.decompress_raw, data)
        if codec == 3:
            import lz4.frame  # type: ignore[import-not-found]

            return bytes(lz4.frame.decompress(data))
        if codec == 4:
            import zstandard  # type: ignore[import-not-found]

            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
    except ImportError:
        pass
    raise SourceError(
        f"a Kafka record batch is compressed with {name}, which this Python cannot read: "
        f"install {package or 'a reader for it'} (pip install {package}), or read the topic "
        "with client=confluent"
    )


def _snappy(raw: Any, data: bytes) -> bytes:
    """Snappy as Kafka writes it: one raw block, or xerial framing (the Java clients': a
    header, then chunks each after its size)."""
    if not data.startswith(b"\x82SNAPPY\x00"):
        return bytes(raw(data))
    out, i = bytearray(), 16
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "big")
        out += bytes(raw(data[i + 4 : i + 4 + n]))
        i += 4 + n
    return bytes(out)


class Fetched:
    """One fetch's values: the block, each line's end, each record's offset, the nulls, and
    the lines that are not one value each (a null, an empty value, one holding a ``\\n``),
    sorted, which the kernel found as it copied the values: a slice is checked by looking
    these up, never by scanning the block again."""

    __slots__ = ("block", "ends", "offsets", "nulls", "irregular", "at", "next_offset")

    def __init__(self, parts: list[tuple[Any, ...]], next_offset: int) -> None:
        if len(parts) == 1:
            self.block, self.ends, self.offsets, nulls = parts[0][:4]
            self.nulls = set(nulls)
            odd = parts[0][7]
        else:
            shift = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            count = np.cumsum([0] + [len(p[1]) for p in parts[:-1]]).tolist()
            self.block = b"".join(p[0] for p in parts)
            self.ends = np.concatenate([p[1] + s for p, s in zip(parts, shift, strict=True)])
            self.offsets = np.concatenate([p[2] for p in parts])
            self.nulls = {n + c for p, c in zip(parts, count, strict=True) for n in p[3]}
            odd = [n + c for p, c in zip(parts, count, strict=True) for n in p[7]]
        self.irregular = sorted(self.nulls.union(odd)) if self.nulls or odd else []
        self.at = 0
        self.next_offset = next_offset

    def left(self) -> int:
        return len(self.offsets) - self.at

    def take(self, n: int, stop: int | None) -> tuple[Any, int]:
        """The next ``n`` values (before ``stop``): a ``LineBlock`` when each is one line,
        else a list of values (``None`` for a null); and the offset after the last."""
        i = self.at
        j = min(i + n, len(self.offsets))
        if stop is not None and j > i and int(self.offsets[j - 1]) >= stop:
            j = i + int(np.searchsorted(self.offsets[i:j], stop))
        self.at = j
        if j == i:
            return [], -1
        lo = int(self.ends[i - 1]) if i else 0
        # a copy: the block may be the partition's buffer, which its next fetch overwrites
        data = bytes(self.block[lo : int(self.ends[j - 1])])
        after = int(self.offsets[j - 1]) + 1
        odd = self.irregular
        k = bisect_left(odd, i)
        if k < len(odd) and odd[k] < j:
            return self._values(i, j, lo, data), after
        return LineBlock(data, j - i), after

    def _values(self, i: int, j: int, lo: int, data: bytes) -> list[bytes | None]:
        """Each value on its own (a null, an empty value or one holding a ``\\n``)."""
        starts = [lo, *self.ends[i : j - 1].tolist()]
        ends = self.ends[i:j].tolist()
        return [
            None if i + k in self.nulls else data[s - lo : e - lo - 1]
            for k, (s, e) in enumerate(zip(starts, ends, strict=True))
        ]


class RawPartition:
    """One partition through its own connection to the leader (``PartitionConsumer``)."""

    def __init__(
        self, bootstrap: str, security: KafkaSecurity, topic: str, partition: int,
        group: str | None, fetch_max_bytes: int, max_partition_fetch_bytes: int,
    ) -> None:  # fmt: skip
        from weir.engine.kernels import KERNELS

        self._kernels = KERNELS
        self._bootstrap, self._security, self._group = bootstrap, security, group
        self._topic, self._partition = topic, partition
        self._split = f"{topic}/{partition}"
        self._max_bytes = (fetch_max_bytes, max_partition_fetch_bytes)
        self._wire: Wire | None = None
        self._retry_at = 0.0
        self._next = -1  # the offset the next fetch asks for
        self._fetched: Fetched | None = None
        self._high: int | None = None
        self._committer: Any = None
        # what the kernel writes a fetch's values into, kept while the partition has records
        # to read: a new block a fetch (~the fetch's size) faulted in every page again
        self._out: bytearray | None = None
        self._connect(first=True)

    def _connect(self, first: bool = False) -> Wire:
        """The connection to the leader, made now (the first, retried by ``retrying``)."""
        if self._wire is not None:
            return self._wire

        def attempt(timeout_ms: int) -> Wire:
            where = leader(self._bootstrap, self._topic, self._partition, timeout_ms / 1000)
            return Wire(where, TIMEOUT_S)

        if first:
            from weir.engine.sources.kafka_connect import retrying

            what = f"partition {self._split}"
            self._wire = retrying(attempt, (OSError,), what, self._bootstrap, self._security)
        else:
            self._wire = attempt(int(TIMEOUT_S * 1000))
        return self._wire

    def _list_offset(self, timestamp: int) -> int:
        """ListOffsets at ``timestamp`` (-2: the first offset, -1: the end); -1 when none."""
        body = list_offsets_request(self._topic, self._partition, timestamp)
        error, offset = list_offsets_answer(self._connect().request(LIST_OFFSETS, body))
        if error:
            raise SourceError(
                f"Kafka partition {self._split}: ListOffsets failed with error {error}"
            )
        return offset

    def start_at(self, offset: int | None, start: str) -> int:
        if offset is not None:
            at = int(offset)
        elif start in ("earliest", "latest"):
            at = self._list_offset(-2 if start == "earliest" else -1)
        else:
            at = self._list_offset(int(start))
            if at < 0:  # nothing at or after that time: the end
                at = self._list_offset(-1)
        self._next = at
        return at

    def _send_fetch(self, wire: Wire) -> None:
        wire.send(FETCH, fetch_request(self._topic, self._partition, self._next, 50,
                                       *self._max_bytes))  # fmt: skip

    def poll(
        self, max_records: int, timeout_ms: int, lean: bool, stop: int | None
    ) -> tuple[list[Any] | LineBlock, int]:
        """Up to ``max_records`` values before ``stop``: what the last fetch holds, else what
        the fetch in flight brings within ``timeout_ms`` (the next one is sent at once)."""
        if self._fetched is None or not self._fetched.left():
            self._fetched = self._fetch(timeout_ms / 1000)
        if self._fetched is None:
            return [], -1
        return self._fetched.take(max_records, stop)

    def _fetch(self, timeout_s: float) -> Fetched | None:
        """The response of the fetch in flight, read into values; None when none came."""
        if time.monotonic() < self._retry_at:
            return None
        try:
            wire = self._connect()
            if not wire.waiting:
                self._send_fetch(wire)
            if not wire.ready(timeout_s):
                return None
            got = fetch_answer(wire.receive())
        except (OSError, SourceError) as exc:
            self._lost(f"{type(exc).__name__}: {exc}")
            return None
        if got.error_code:
            self._refused(int(got.error_code))
            return None
        self._high = int(got.high_watermark)
        fetched = self._values(got.records)
        self._next = fetched.next_offset
        self._send_fetch(wire)  # the next fetch, while this one is read
        return fetched

    def _values(self, records: Any) -> Fetched:
        """A fetch's records from ``self._next`` as values (compressed batches inflated)."""
        k = self._kernels
        parts: list[tuple[Any, ...]] = []
        pos, nxt = 0, self._next
        if not len(records):
            self._out = None  # nothing to read now: give the memory back
        elif self._out is None or len(self._out) < len(records):
            self._out = bytearray(-(-len(records) // _MIB) * _MIB)
        while True:
            # the partition's buffer for the first part only: a second would overwrite it
            out = self._out if pos == 0 else None
            part = k.batch_values(records, pos, nxt, NO_STOP, True, out)
            parts.append(part)
            pos, nxt, status = part[4], part[5], part[6]
            if status == DONE:
                break
            if status == OLD_MAGIC:
                raise SourceError(
                    f"Kafka partition {self._split} holds message sets older than magic 2 "
                    "(Kafka < 0.11); read it with client=confluent"
                )
            base, length, _, _, _, attrs, delta, *_, count = BATCH_HEAD.unpack_from(records, pos)
            end = pos + 12 + length
            inner = decompress(attrs & 7, bytes(records[pos + HEADER : end]))
            parts.append(k.record_values(inner, count, base, nxt, NO_STOP))
            pos, nxt = end, max(nxt, base + delta + 1)
        return Fetched(parts, nxt)

    def _lost(self, reason: str) -> None:
        """The connection broke: drop it, warn, and reconnect after a while."""
        log.warning("kafka partition=%s connection lost (%s); reconnecting", self._split, reason)
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        self._retry_at = time.monotonic() + 0.5

    def _refused(self, code: int) -> None:
        """A fetch answered with an error: find the leader again, or move to the end of a
        log that no longer holds the offset (librdkafka's ``auto.offset.reset=latest``)."""
        if code == _OUT_OF_RANGE:
            at = self._list_offset(-1)
            log.warning("kafka partition=%s offset %s is out of range; resuming at the end, "
                        "offset %s", self._split, self._next, at)  # fmt: skip
            self._next = at
            if self._wire is not None:
                self._send_fetch(self._wire)
            return
        self._lost(f"fetch error {code}" + (" (leader moved)" if code in _RELOCATE else ""))

    def highwater(self) -> int | None:
        return self._high

    def position(self) -> int:
        f = self._fetched
        if f is not None and f.left():
            return int(f.offsets[f.at])
        return self._next

    def _commit_client(self) -> Any:
        if self._committer is None:
            from weir.engine.sources.kafka_confluent import ConfluentPartition

            self._committer = ConfluentPartition(
                self._bootstrap, self._security, self._topic, self._partition, self._group,
                *self._max_bytes,
            )  # fmt: skip
        return self._committer

    def commit(self, offset: int) -> None:
        self._commit_client().commit(offset)

    def close(self) -> None:
        self._out = None
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        if self._committer is not None:
            self._committer.close()
