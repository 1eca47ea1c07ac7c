"""Every way an HTTP connection waits on its client has a deadline, with both of uvicorn's
protocols weir may run (httptools, and h11 where httptools is missing): a connection that sends
nothing, a request head trickled a byte at a time, a body that never ends, and a response the
client never reads are each closed at their deadline (short ones here), however slowly bytes
trickle in; and past the cap of waiting connections the one waiting longest is closed while a
new request is answered. uvicorn serves a small app on loopback in this process."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI, Request, Response

from tests.security._http import Served, serve
from tests.support import wait_until
from weir.app.http_guard import ConnectionGuard, protocol

HEAD_S, BODY_S, WRITE_S = 1.0, 1.5, 1.5
CAP = 8
BIG = b"x" * (16 << 20)  # more than the socket buffers of both ends hold


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/echo")
    async def echo(request: Request) -> Response:
        return Response(await request.body())

    @app.get("/big")
    def big() -> Response:
        return Response(BIG, media_type="application/octet-stream")

    return app


@pytest.fixture(params=["httptools", "h11"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Served, ConnectionGuard]]:
    deadlines = {"head": HEAD_S, "body": BODY_S, "write": WRITE_S}
    guard = ConnectionGuard(CAP, deadlines=deadlines)
    with serve(_app(), http=protocol(guard, request.param)) as s:
        yield s, guard


def _closed_after(port: int, feed: Callable[[socket.socket, int], None], limit_s: float) -> float:
    """Seconds until the server closes a connection fed by ``feed(sock, tick)`` every 0.2 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        started = time.monotonic()
        s.settimeout(0.2)
        tick = 0
        while time.monotonic() - started < limit_s:
            try:
                feed(s, tick)
                if s.recv(65536) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                pass
            except OSError:
                return time.monotonic() - started
            tick += 1
    return float("inf")


def _silent(s: socket.socket, tick: int) -> None:
    pass


def _trickled_head(s: socket.socket, tick: int) -> None:
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" if tick == 0 else b"X")


def _trickled_body(s: socket.socket, tick: int) -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9999\r\n\r\n"
    s.sendall(head if tick == 0 else b"{")


@pytest.mark.parametrize(
    ("feed", "deadline"),
    [(_silent, HEAD_S), (_trickled_head, HEAD_S), (_trickled_body, BODY_S)],
    ids=["silent", "trickled-head", "trickled-body"],
)
def test_a_wait_on_the_client_ends_at_its_deadline(
    served: tuple[Served, ConnectionGuard], feed: Callable[[socket.socket, int], None],
    deadline: float,
) -> None:  # fmt: skip
    s, guard = served
    held = _closed_after(s.port, feed, deadline + 10)
    assert deadline - 0.3 <= held <= deadline + 1.5, held
    assert guard.waiting == 0


def test_a_response_never_read_ends_at_its_deadline(
    served: tuple[Served, ConnectionGuard],
) -> None:
    s, guard = served
    connections = s.server.server_state.connections
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # and never reads
        wait_until(lambda: guard.waiting == 1, 5.0, what="the server's writes to pause")
        started = time.monotonic()
        wait_until(lambda: not connections, WRITE_S + 10, what="the connection to be closed")
        assert time.monotonic() - started <= WRITE_S + 1.5
    assert guard.waiting == 0


def test_past_the_cap_the_longest_waiting_goes_and_a_new_request_is_answered(
    served: tuple[Served, ConnectionGuard],
) -> None:
    s, guard = served
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(3 * CAP)]
    try:
        for _ in range(3):  # the cap stays full: each request evicts a held one
            with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
                c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                assert c.recv(4096).startswith(b"HTTP/1.1 200")
        assert guard.waiting <= CAP
        closed = 0
        for c in held[: 2 * CAP]:  # the oldest were closed by the server
            c.settimeout(2.0)
            try:
                closed += c.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == 2 * CAP
    finally:
        for c in held:
            c.close()
