"""uvicorn's HTTP protocol with deadlines on the client: no connection waits on its client for
ever, and connections that wait cannot keep anyone else out.

uvicorn times out a kept-alive connection that is idle, but not one that never finishes its
request's head (nor one that sends nothing at all), and it counts every such connection
against ``limit_concurrency``: one local account holding 1,032 half-sent requests made every
request, ``/health`` included, get 503. Here a connection is *waiting on its client* while it
waits for a request's head (a new connection, or a kept-alive one between requests), for the
rest of a request's body, or for the client to read a response that filled the socket. Each
wait has a deadline of its own (``HEAD_S``, ``BODY_S``, ``WRITE_S``, from when it began,
however slowly bytes trickle in); at most ``limit`` connections wait at once, and a new one past
that closes the one that has waited longest, so a new client, ``/health`` or a state read, is
always heard. A peer off loopback may hold at most ``per_peer`` of the waiting ones (the oldest
of its own goes first); on loopback every local account has the same address, so there the
oldest-first rule is the defence. Requests the server is working on are not counted: the work
is bounded by the server's own threads.

``protocol(guard)`` is the class for ``uvicorn.Config(http=…)``: httptools' protocol when it is
installed, else h11's (the pure-Python twin), as uvicorn's own ``auto`` chooses.

``protocol(guard, direct=…)`` also answers the point lookups ``direct`` takes
(``api.fastpath.DirectAnswer``, decision 0027) in the protocol's own callback: a kept-alive
HTTP/1.1 ``GET`` without a body, on a connection with no other response under way, is offered
to ``direct`` before uvicorn makes its ASGI scope, cycle and task; an answer is written as one
buffer (status line, uvicorn's default headers, the answer's, the body), where the ASGI path
writes the head and the body apart. What ``direct`` declines goes on as any request. (h11's
protocol has no direct answers: it is the fallback, not the fast path.)
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weir.engine.runtime.droplog import DropLog

if TYPE_CHECKING:
    from weir.api.fastpath import Answer

log = logging.getLogger(__name__)

HEAD_S = 10.0  # from a connection's start (or its last response) to a complete request head
BODY_S = 30.0  # from the head to the body's last byte (bodies are at most 1 MiB)
WRITE_S = 30.0  # a response the client does not read, from when the socket filled
DEADLINES = {"head": HEAD_S, "body": BODY_S, "write": WRITE_S}
# ``api.fastpath.DirectAnswer``: (path, query, headers) -> its answer, or None
Direct = Callable[[str, bytes, list[tuple[bytes, bytes]]], "Answer | None"]
_WHY = {
    "head": "no complete request head within %g s",
    "body": "no complete request body within %g s",
    "write": "the client read none of its response for %g s",
}


@dataclass(slots=True)
class _Waiting:
    peer: str
    kind: str
    since: float  # the loop's time when the wait began


class ConnectionGuard:
    """The connections of one server that wait on their clients (see the module docstring).

    No timer per wait: a wait is an entry stamped with the loop's time, and one sweep every
    ``tick`` seconds (an eighth of the shortest deadline, at most 1 s) closes the expired, so a
    connection goes within ``tick`` past its deadline. A wait begins and ends on every request
    of a kept-alive connection; a timer made and cancelled each time cost a lookup 5% of its
    CPU.

    Args:
        limit: connections waiting at once at most (``--max-connections``).
        per_peer: of those, from one address off loopback at most (default a quarter).
        deadlines: seconds per wait (``head``, ``body``, ``write``); ``DEADLINES`` by default.
    """

    def __init__(
        self, limit: int, per_peer: int | None = None, deadlines: dict[str, float] | None = None
    ) -> None:
        self.limit = max(limit, 1)
        self.per_peer = max(per_peer if per_peer is not None else self.limit // 4, 1)
        self.deadlines = {**DEADLINES, **(deadlines or {})}
        self.tick = min(max(min(self.deadlines.values()) / 8, 0.01), 1.0)
        # by ``since``: a wait is appended when it begins and never moves (``wait``)
        self._waiting: OrderedDict[Any, _Waiting] = OrderedDict()
        self._by_peer: Counter[str] = Counter()
        self._drops = DropLog(log, "http:")
        self._swept_by: asyncio.AbstractEventLoop | None = None  # whose sweep is scheduled

    @property
    def waiting(self) -> int:
        """Connections waiting on their clients now."""
        return len(self._waiting)

    def wait(self, proto: Any, kind: str) -> None:
        """``proto``'s connection now waits on its client for ``kind`` (head, body, write); a
        wait of the same kind already running keeps its deadline."""
        found = self._waiting.get(proto)
        if found is not None:
            if found.kind == kind:
                return
            self.done(proto)
        loop = asyncio.get_running_loop()
        peer = _peer(proto)
        self._waiting[proto] = _Waiting(peer, kind, loop.time())
        if self._swept_by is not loop:
            self._swept_by = loop
            loop.call_later(self.tick, self._expire, loop)
        if not _is_local(peer):
            self._by_peer[peer] += 1
            if self._by_peer[peer] > self.per_peer:
                oldest = next(p for p, w in self._waiting.items() if w.peer == peer)
                self._close(oldest, f"{peer} has {self.per_peer} connections waiting already")
        if len(self._waiting) > self.limit:
            oldest = next(iter(self._waiting))
            self._close(oldest, f"{self.limit} connections wait on their clients; the oldest goes")

    def done(self, proto: Any) -> None:
        """``proto``'s connection no longer waits on its client (or is gone)."""
        found = self._waiting.pop(proto, None)
        if found is None or _is_local(found.peer):
            return
        self._by_peer[found.peer] -= 1
        if self._by_peer[found.peer] <= 0:
            del self._by_peer[found.peer]

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The sweep: closes every wait past its deadline, oldest first; again in ``tick``
        while anyone waits."""
        now = loop.time()
        shortest = min(self.deadlines.values())
        expired = []
        for proto, found in self._waiting.items():
            waited = now - found.since
            if waited < shortest:  # and so has every later one: they began after it
                break
            if waited >= self.deadlines[found.kind]:
                expired.append((proto, found.kind))
        try:  # a close that raises reaches the loop's handler; the rest go at the next sweep
            for proto, kind in expired:
                self._close(proto, _WHY[kind] % self.deadlines[kind])
            self._drops.flush()
        finally:  # rescheduled whatever happened: a sweep that stopped ends every deadline
            if self._waiting and self._swept_by is loop:
                loop.call_later(self.tick, self._expire, loop)
            elif self._swept_by is loop:
                self._swept_by = None

    def _close(self, proto: Any, why: str) -> None:
        found = self._waiting.get(proto)
        self.done(proto)
        self._drops.dropped(found.peer if found else "?", why)
        transport = getattr(proto, "transport", None)
        if transport is not None:
            transport.abort()  # close() would first flush a response the client is not reading


def _peer(proto: Any) -> str:
    client = getattr(proto, "client", None)
    return str(client[0]) if client else "?"


@functools.lru_cache(maxsize=1024)  # twice a request, on a handful of client addresses
def _is_local(peer: str) -> bool:
    try:
        return ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return True  # a unix socket, or unknown: no address to cap by


def _expects_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


def protocol(
    guard: ConnectionGuard, impl: str = "auto", direct: Direct | None = None
) -> type[asyncio.Protocol]:
    """The protocol class that applies ``guard``: ``impl`` ``httptools`` or ``h11``; ``auto``,
    httptools' when it is installed, else h11's. httptools' answers what ``direct`` answers
    (see the module)."""
    if impl == "auto":
        try:
            import httptools  # noqa: F401 - only whether it is there
        except ImportError:
            impl = "h11"
        else:
            impl = "httptools"
    return _h11(guard) if impl == "h11" else _httptools(guard, direct)


def _httptools(guard: ConnectionGuard, direct: Direct | None) -> type[asyncio.Protocol]:
    from httptools import parse_url
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    class GuardedHttpTools(HttpToolsProtocol):
        _direct_out: bytes | None = None  # a direct answer, written as the request completes

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            guard.wait(self, "head")

        def connection_lost(self, exc: Exception | None) -> None:
            guard.done(self)
            super().connection_lost(exc)

        def on_headers_complete(self) -> None:
            self._direct_out = (
                None if direct is None else _answer_directly(self, direct, parse_url, STATUS_LINE)
            )
            if self._direct_out is not None:
                guard.done(self)
                return
            super().on_headers_complete()
            if _expects_body(self.headers):
                guard.wait(self, "body")
            else:
                guard.done(self)

        def on_message_complete(self) -> None:
            out, self._direct_out = self._direct_out, None
            if out is None:
                super().on_message_complete()
                guard.done(self)
                return
            self.transport.write(out)
            self.on_response_complete()  # as the cycle would: keep-alive timer, reading on

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)  # a request already read starts now: not waiting
            super().on_response_complete()
            if not self.transport.is_closing() and not pipelined:
                guard.wait(self, "head")

        def pause_writing(self) -> None:
            super().pause_writing()
            guard.wait(self, "write")

        def resume_writing(self) -> None:
            super().resume_writing()
            guard.done(self)

    return GuardedHttpTools


def _answer_directly(
    proto: Any, direct: Direct, parse_url: Callable[[bytes], Any], status_line: dict[int, bytes]
) -> bytes | None:
    """The whole response to the request whose head ``proto`` (httptools' protocol) just
    read, if ``direct`` answers it; ``None`` for the ASGI path. ``parse_url`` and
    ``status_line``: httptools' and uvicorn's."""
    parser = proto.parser
    if (
        parser.get_method() != b"GET"
        or parser.get_http_version() != "1.1"
        or not parser.should_keep_alive()
        or parser.should_upgrade()
        or proto.expect_100_continue
        or proto.root_path
        or proto.pipeline
        or (proto.cycle is not None and not proto.cycle.response_complete)
        or proto.flow.write_paused
        or _expects_body(proto.headers)
    ):
        return None
    try:
        url = parse_url(proto.url)
        # a quoted path takes uvicorn's unquoting, and a path it cannot read its error
        if b"%" in url.path or not url.path.isascii():
            return None
        got = direct(url.path.decode("ascii"), url.query or b"", proto.headers)
    except Exception:  # noqa: BLE001 - a fault of the fast path's is not the request's
        log.exception("a direct answer failed; the request takes the ASGI path")
        return None
    if got is None:
        return None
    status, headers, body = got
    out = [status_line[status]]
    for name, value in (*proto.server_state.default_headers, *headers):
        out += (name, b": ", value, b"\r\n")
    out += (b"\r\n", body)
    return b"".join(out)


def _h11(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            guard.wait(self, "head")

        def connection_lost(self, exc: Exception | None) -> None:
            guard.done(self)
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.transport.is_closing():
                guard.done(self)
            elif self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
                guard.wait(self, "head")
            elif self.conn.their_state is h11.SEND_BODY:
                guard.wait(self, "body")
            else:
                guard.done(self)

        def pause_writing(self) -> None:
            super().pause_writing()
            guard.wait(self, "write")

        def resume_writing(self) -> None:
            super().resume_writing()
            guard.done(self)

    return GuardedH11
