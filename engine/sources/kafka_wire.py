"""One plaintext Kafka connection for the raw source (``kafka_raw``), with the three requests
it sends encoded and their responses decoded here, by ``struct``: Metadata v4 (the partition's
leader), ListOffsets v1 (a start position) and Fetch v4 (full fetches, ``read_uncommitted`` as
the other clients). Each is a version every broker since Kafka 1.0 answers and Kafka 4 still
does, and none is a flexible version (no tagged fields, no compact arrays).

Why not kafka-python's protocol classes (decision 0018's first version): importing them builds
every message's codec from its JSON schema, 0.13 CPU-s in each worker before its first fetch,
and each fetch response became a tree of objects. Why not kafka-python's connection: it reads
4 KiB at a time and copies a response twice. Here a response is read with ``recv_into`` into
one buffer, and a Fetch response's records are a view of it. The buffer is the thread's, kept
and reused by every connection the thread reads (a fresh one of a fetch's size each time
faulted in every page of it again, and one a connection cost a worker of many partitions a
fetch's size each): what a response holds is read before the thread reads the next one.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from dataclasses import dataclass

from weir.base.errors import SourceError
from weir.engine.kafka_security import KafkaSecurity, split_host

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3  # API keys
VERSIONS = {FETCH: 4, LIST_OFFSETS: 1, METADATA: 4}
CLIENT_ID = b"weir"
_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id's length
_FETCH_HEAD = struct.Struct(">iiiib")  # replica, max wait, min bytes, max bytes, isolation
_FETCH_PART = struct.Struct(">iqi")  # partition, fetch offset, partition max bytes
_FETCH_ANSWER = struct.Struct(">ihqq")  # partition, error, high watermark, last stable
_LIST_ANSWER = struct.Struct(">ihqq")  # partition, error, timestamp, offset
_MIB = 1 << 20
_local = threading.local()  # the thread's receive buffer (``Wire.receive``)


def _buffer(size: int) -> bytearray:
    """The thread's receive buffer, of ``size`` bytes at least."""
    buf: bytearray | None = getattr(_local, "buf", None)
    if buf is None or len(buf) < size:
        # a new one (a view of the old one may still be held), in whole MiBs
        buf = _local.buf = bytearray(-(-size // _MIB) * _MIB)
    return buf


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def _one_topic(topic: str, partition_fields: bytes) -> bytes:
    """An array of one topic holding an array of one partition."""
    return _I32.pack(1) + _string(topic) + _I32.pack(1) + partition_fields


def fetch_request(
    topic: str, partition: int, offset: int, max_wait_ms: int, max_bytes: int,
    partition_max_bytes: int,
) -> bytes:  # fmt: skip
    """A Fetch v4 body for one partition (min bytes 1, read uncommitted)."""
    head = _FETCH_HEAD.pack(-1, max_wait_ms, 1, max_bytes, 0)
    return head + _one_topic(topic, _FETCH_PART.pack(partition, offset, partition_max_bytes))


def list_offsets_request(topic: str, partition: int, timestamp: int) -> bytes:
    """A ListOffsets v1 body: the offset at ``timestamp`` (-2: the first, -1: the end)."""
    return _I32.pack(-1) + _one_topic(topic, _I32.pack(partition) + _I64.pack(timestamp))


def metadata_request(topic: str) -> bytes:
    """A Metadata v4 body for one topic, never creating it."""
    return _I32.pack(1) + _string(topic) + _I8.pack(0)


class _Reader:
    """Fields read in order from a response body (``struct``'s big-endian ones)."""

    __slots__ = ("buf", "at")

    def __init__(self, buf: memoryview) -> None:
        self.buf, self.at = buf, 0

    def fixed(self, form: struct.Struct) -> tuple[int, ...]:
        got = form.unpack_from(self.buf, self.at)
        self.at += form.size
        return got

    def num(self, form: struct.Struct) -> int:
        return int(self.fixed(form)[0])

    def string(self) -> str | None:
        n = self.num(_I16)
        if n < 0:
            return None
        self.at += n
        return bytes(self.buf[self.at - n : self.at]).decode()

    def skip_array(self, item_size: int) -> None:
        count = self.num(_I32)  # (-1: null)
        self.at += max(count, 0) * item_size


def _to_partition(r: _Reader, what: str) -> None:
    """Past a response's topic array to its first topic's first partition.

    Raises:
        OSError: the response holds no topic or no partition (the broker answered something
            else).
    """
    if r.num(_I32) < 1:
        raise OSError(f"a {what} response without its topic")
    r.string()
    if r.num(_I32) < 1:
        raise OSError(f"a {what} response without its partition")


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """A Fetch response's one partition: its error, high watermark and records (a view of
    the thread's receive buffer: valid until the thread reads the next response)."""

    error_code: int
    high_watermark: int
    records: memoryview


def fetch_answer(body: memoryview) -> FetchAnswer:
    """The one partition of a Fetch v4 response.

    Raises:
        OSError: the response holds no partition (the broker answered something else).
    """
    r = _Reader(body)
    r.num(_I32)  # throttle time
    _to_partition(r, "Fetch")
    _, error, high, _ = r.fixed(_FETCH_ANSWER)
    r.skip_array(16)  # aborted transactions: producer id, first offset
    n = r.num(_I32)
    records = body[r.at : r.at + max(n, 0)]
    return FetchAnswer(int(error), int(high), records)


def list_offsets_answer(body: memoryview) -> tuple[int, int]:
    """The one partition of a ListOffsets v1 response: its error code and offset.

    Raises:
        OSError: the response holds no partition (the broker answered something else).
    """
    r = _Reader(body)
    _to_partition(r, "ListOffsets")
    _, error, _, offset = r.fixed(_LIST_ANSWER)
    return int(error), int(offset)


def metadata_answer(body: memoryview, topic: str) -> tuple[dict[int, str], dict[int, int]]:
    """A Metadata v4 response: every broker's ``host:port`` by node id, and the leader of
    each of ``topic``'s partitions by partition (-1: none now)."""
    r = _Reader(body)
    r.num(_I32)  # throttle time
    brokers: dict[int, str] = {}
    for _ in range(r.num(_I32)):
        node, host, port = r.num(_I32), r.string(), r.num(_I32)
        r.string()  # rack
        brokers[node] = f"{host}:{port}"
    r.string()  # cluster id
    r.num(_I32)  # controller
    leaders: dict[int, int] = {}
    for _ in range(r.num(_I32)):
        r.num(_I16)  # the topic's error: an unknown topic has no partitions
        name = r.string()
        r.num(_I8)  # internal
        for _ in range(r.num(_I32)):
            r.num(_I16)  # the partition's error: a partition without a leader has -1
            index, lead = r.num(_I32), r.num(_I32)
            r.skip_array(4)  # replicas
            r.skip_array(4)  # in-sync replicas
            if name == topic:
                leaders[index] = lead
    return brokers, leaders


class Wire:
    """A connection to one broker; one request in flight at a time.

    Example:
        >>> Wire.__name__
        'Wire'
    """

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self._timeout = timeout_s
        self._sock = socket.create_connection(split_host(address), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_id = 0
        self._pending = 0  # the correlation id of the request in flight (0: none)
        self._size = bytearray(4)

    @property
    def waiting(self) -> bool:
        """Whether a request sent has no response read yet."""
        return self._pending != 0

    def send(self, api_key: int, body: bytes) -> None:
        """Send a request of ``api_key`` (its version: ``VERSIONS``) whose fields are
        ``body``."""
        self._next_id = self._next_id % 0x7FFFFFFF + 1
        head = _HEADER.pack(api_key, VERSIONS[api_key], self._next_id, len(CLIENT_ID))
        size = len(head) + len(CLIENT_ID) + len(body)
        self._sock.sendall(b"".join((_I32.pack(size), head, CLIENT_ID, body)))
        self._pending = self._next_id

    def ready(self, timeout_s: float) -> bool:
        """Whether the response to the request sent can be read within ``timeout_s``."""
        return bool(select.select([self._sock], [], [], timeout_s)[0])

    def receive(self) -> memoryview:
        """The body of the response to the request sent (after its correlation id): a view
        of the thread's buffer, valid until the thread reads the next response.

        Raises:
            OSError: the connection broke or the broker answered something else.
        """
        if not self._pending:
            raise OSError("no request in flight")
        cid, self._pending = self._pending, 0
        self._sock.settimeout(self._timeout)
        self._read_into(memoryview(self._size))
        size = _I32.unpack(self._size)[0]
        if size < 4:
            raise OSError(f"broker {self.address} answered a response of {size} bytes")
        body = memoryview(_buffer(size))[:size]
        self._read_into(body)
        if _I32.unpack_from(body)[0] != cid:
            raise OSError(f"broker {self.address} answered request {cid} out of turn")
        return body[4:]

    def request(self, api_key: int, body: bytes) -> memoryview:
        """Send a request and wait for its response's body."""
        self.send(api_key, body)
        return self.receive()

    def _read_into(self, view: memoryview) -> None:
        got, n = 0, len(view)
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if not k:
                raise OSError(f"broker {self.address} closed the connection")
            got += k

    def close(self) -> None:
        """Close the connection (a response not read is dropped)."""
        self._pending = 0
        self._sock.close()


def metadata(bootstrap: str, topic: str, timeout_s: float) -> tuple[dict[int, str], dict[int, int]]:
    """``metadata_answer`` from the first broker of ``bootstrap`` that answers.

    Raises:
        OSError: no broker of ``bootstrap`` answered.
    """
    failed: OSError | None = None
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        try:
            wire = Wire(address, timeout_s)
        except OSError as exc:  # the next bootstrap broker may answer
            failed = exc
            continue
        try:
            return metadata_answer(wire.request(METADATA, metadata_request(topic)), topic)
        finally:
            wire.close()
    raise failed or OSError(f"no broker in {bootstrap!r}")


def leader(bootstrap: str, topic: str, partition: int, timeout_s: float) -> str:
    """The ``host:port`` of the broker that leads ``topic``'s ``partition``.

    Raises:
        SourceError: the topic or partition does not exist, or has no leader now.
        OSError: no broker of ``bootstrap`` answered.
    """
    brokers, leaders = metadata(bootstrap, topic, timeout_s)
    if leaders.get(partition, -1) in brokers:
        return brokers[leaders[partition]]
    raise SourceError(
        f"Kafka partition {topic}/{partition} has no leader on {bootstrap} now; check that the "
        "topic exists and its brokers are up"
    )


def partitions(
    bootstrap: str, security: KafkaSecurity, topic: str, what: str = ""
) -> set[int] | None:
    """``topic``'s partitions (None when it does not exist), by one Metadata request over
    PLAINTEXT, retried while no broker answers: what ``client=auto`` asks (a confluent-kafka
    client started for it cost a process 0.03 CPU-s and 50-85 ms the first time)."""
    from weir.engine.sources.kafka_connect import retrying

    def attempt(timeout_ms: int) -> set[int]:
        return set(metadata(bootstrap, topic, timeout_ms / 1000)[1])

    found = retrying(attempt, (OSError,), what or f"topic {topic}", bootstrap, security)
    return found or None
