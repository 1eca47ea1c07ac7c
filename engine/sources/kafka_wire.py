"""One plaintext Kafka connection for the raw source (``kafka_raw``): requests encoded and
responses decoded by kafka-python's protocol classes, but the bytes read by this module, one
``recv_into`` a chunk into one buffer of the response's size (kafka-python's own connection
reads 4 KiB at a time and copies the response twice, which cost as much CPU as librdkafka).

Only what the raw source asks is here: Metadata (v4, the partition's leader), ListOffsets (v1,
a start position) and Fetch (v4: full fetches, ``read_uncommitted`` as the other clients);
each is a version every broker since Kafka 1.0 answers and Kafka 4 still does.
"""

from __future__ import annotations

import select
import socket
import struct
from typing import Any

from weir.base.errors import SourceError

FETCH_VERSION = 4
_SIZE = struct.Struct(">i")
CLIENT_ID = "weir"


def split_host(address: str) -> tuple[str, int]:
    """``host:port`` -> ``(host, port)``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


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
        self._pending: tuple[int, Any] | None = None

    @property
    def waiting(self) -> bool:
        """Whether a request sent has no response read yet."""
        return self._pending is not None

    def send(self, request: Any, version: int) -> None:
        """Send ``request`` (a kafka-python ``ApiMessage``) as ``version``."""
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        request.with_header(correlation_id=self._next_id, client_id=CLIENT_ID)
        self._sock.sendall(request.encode(version=version, framed=True, header=True))
        self._pending = (self._next_id, type(request))

    def ready(self, timeout_s: float) -> bool:
        """Whether the response to the request sent can be read within ``timeout_s``."""
        return bool(select.select([self._sock], [], [], timeout_s)[0])

    def receive(self, version: int) -> Any:
        """The response to the request sent, as kafka-python decodes it; a Fetch response's
        ``records`` are slices of the one buffer.

        Raises:
            OSError: the connection broke or the broker answered something else.
        """
        if self._pending is None:
            raise OSError("no request in flight")
        cid, kind = self._pending
        self._sock.settimeout(self._timeout)
        size = _SIZE.unpack(self._read(4))[0]
        body = self._read(size)
        self._pending = None
        if _SIZE.unpack_from(body)[0] != cid:
            raise OSError(f"broker {self.address} answered request {cid} out of turn")
        return _response_of(kind).decode(memoryview(body)[4:], version=version)

    def request(self, request: Any, version: int) -> Any:
        """Send ``request`` and wait for its response."""
        self.send(request, version)
        return self.receive(version)

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if not k:
                raise OSError(f"broker {self.address} closed the connection")
            got += k
        return buf

    def close(self) -> None:
        """Close the connection (a response not read is dropped)."""
        self._pending = None
        self._sock.close()


def _response_of(kind: Any) -> Any:
    from kafka.protocol.consumer import (
        FetchRequest,
        FetchResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
    )
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    pairs = {
        FetchRequest: FetchResponse,
        ListOffsetsRequest: ListOffsetsResponse,
        MetadataRequest: MetadataResponse,
    }
    return pairs[kind]


def leader(bootstrap: str, topic: str, partition: int, timeout_s: float) -> str:
    """The ``host:port`` of the broker that leads ``topic``'s ``partition``.

    Raises:
        SourceError: the topic or partition does not exist, or has no leader now.
        OSError: no broker of ``bootstrap`` answered.
    """
    from kafka.protocol.metadata import MetadataRequest

    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                          allow_auto_topic_creation=False)  # fmt: skip
    failed: OSError | None = None
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        try:
            wire = Wire(address, timeout_s)
        except OSError as exc:  # the next bootstrap broker may answer
            failed = exc
            continue
        try:
            got = wire.request(req, 4)
            break
        finally:
            wire.close()
    else:
        raise failed or OSError(f"no broker in {bootstrap!r}")
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in got.brokers}
    for t in got.topics:
        for p in t.partitions if t.name == topic else ():
            if p.partition_index == partition and p.leader_id in brokers:
                return brokers[p.leader_id]
    raise SourceError(
        f"Kafka partition {topic}/{partition} has no leader on {bootstrap} now; check that the "
        "topic exists and its brokers are up"
    )
