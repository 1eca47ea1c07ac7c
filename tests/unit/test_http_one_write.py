"""``http_guard.OneWrite`` through uvicorn's real httptools protocol (the class ``weir run``
serves with), a stand-in transport recording each write: a response with a known, small body
is one write (head and body together); a streamed, empty or ``HEAD`` response, or a large body,
is written as uvicorn writes it, the head first and on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.server import ServerState

from weir.app.http_guard import ONE_WRITE_MAX, ConnectionGuard, protocol


class Recording:
    """What uvicorn's protocol asks of a transport, keeping every write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5555)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _chunks() -> AsyncIterator[bytes]:
    yield b"data: 1\n\n"
    yield b"data: 2\n\n"


async def _json(request: Request) -> Response:
    return Response(b'{"n":1}', media_type="application/json")


async def _big(request: Request) -> Response:
    return Response(b"x" * (ONE_WRITE_MAX + 1))


async def _empty(request: Request) -> Response:
    return Response(status_code=204)


async def _stream(request: Request) -> Response:
    return StreamingResponse(_chunks(), media_type="text/event-stream")


APP = Starlette(
    routes=[
        Route("/json", _json, methods=["GET", "HEAD"]),
        Route("/big", _big),
        Route("/empty", _empty),
        Route("/stream", _stream),
    ]
)


def _writes(method: str, path: str) -> list[bytes]:
    async def main() -> list[bytes]:
        config = uvicorn.Config(APP, log_level="warning", lifespan="off")
        config.load()
        proto = protocol(ConnectionGuard(10), "httptools")(  # type: ignore[call-arg]
            config=config, server_state=ServerState(), app_state={}
        )
        transport = Recording()
        proto.connection_made(transport)  # type: ignore[arg-type]
        proto.data_received(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        deadline = asyncio.get_running_loop().time() + 5
        while proto.cycle is None or not proto.cycle.response_complete:
            assert asyncio.get_running_loop().time() < deadline, transport.writes
            await asyncio.sleep(0.001)
        proto.connection_lost(None)
        return transport.writes

    return asyncio.run(main())


def test_a_small_known_body_goes_with_its_head_in_one_write() -> None:
    writes = _writes("GET", "/json")
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b'\r\n\r\n{"n":1}')
    assert b"content-length: 7\r\n" in writes[0]


def test_a_streamed_response_writes_its_head_at_once() -> None:
    writes = _writes("GET", "/stream")
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in writes[0]
    assert b"".join(writes[1:]).count(b"data: ") == 2


def test_head_empty_and_large_answers_are_written_as_uvicorn_writes_them() -> None:
    head = _writes("HEAD", "/json")
    assert len(head) == 1 and head[0].endswith(b"\r\n\r\n") and b"content-length: 7" in head[0]
    empty = _writes("GET", "/empty")
    assert empty[0].startswith(b"HTTP/1.1 204 ") and not b"".join(empty[1:])
    big = _writes("GET", "/big")
    assert len(big) == 2 and big[0].endswith(b"\r\n\r\n") and len(big[1]) == ONE_WRITE_MAX + 1
