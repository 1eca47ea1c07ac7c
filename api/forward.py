"""``weir api`` routes to the job's leader on another host (issue 42 item 3): when the lease
names a leader whose state directory is not on this host (``RemoteRuntime.forward_to``), every
request but this process's own ``/metrics`` goes to the API the leader published in the lease,
and its answer comes back as it was, streamed (event streams too).

It runs inside the token check and the guards: a request is authenticated here before it is
forwarded, with its ``Authorization`` header, to the address the job's own checkpoint storage
names (as trusted as the checkpoints). A forwarded request carries ``X-Weir-Forwarded``; one
that arrives with it is never forwarded again (a lease naming this API itself cannot loop).
A leader that does not answer is a 503 with ``Retry-After`` that names it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from weir.api.errors import error_response

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

FORWARDED = b"x-weir-forwarded"
LOCAL_PATHS = frozenset({"/metrics"})  # this process's own
# hop-by-hop headers (RFC 9110 7.6.1) and those the client library sets itself
DROPPED = frozenset(
    {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade",
     b"proxy-authorization", b"content-length"}
)  # fmt: skip
CONNECT_S = 2.0
READ_S = 600.0  # an admin call (a savepoint, a backfill) may take minutes; streams stay open


class LeaderForward:
    """ASGI: forwards a request to ``target()`` when it names a URL (None: answer here)."""

    def __init__(self, app: ASGIApp, target: Callable[[], str | None]) -> None:
        self.app = app
        self.target = target
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in LOCAL_PATHS:
            await self.app(scope, receive, send)
            return
        url = None if _forwarded(scope) else self.target()
        if url is None:
            await self.app(scope, receive, send)
            return
        await self._forward(url.rstrip("/"), scope, receive, send)

    def _client_here(self) -> httpx.AsyncClient:
        """One client (its pooled connections) per event loop: a server has one loop, a test
        client may run each request in a loop of its own."""
        import httpx  # with the first forward: an API that serves its own job never loads it

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            timeout = httpx.Timeout(READ_S, connect=CONNECT_S)
            self._client = httpx.AsyncClient(timeout=timeout, trust_env=False)
            self._loop = loop
        return self._client

    async def _forward(self, base: str, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(receive)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in DROPPED]
        headers.append((FORWARDED, b"1"))
        query = scope.get("query_string", b"").decode("latin-1")
        target = base + scope["path"] + (f"?{query}" if query else "")
        client = self._client_here()
        import httpx  # loaded by _client_here

        request = client.build_request(scope["method"], target, headers=headers, content=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            log.warning("api: the job's leader at %s did not answer: %s", base, exc)
            refused = error_response(
                503, "leader_unreachable",
                f"the job's leader serves at {base} (its lease says), which did not answer "
                f"({type(exc).__name__}); retry shortly",
                headers={"Retry-After": "1"},
            )  # fmt: skip
            await refused(scope, receive, send)
            return
        try:
            out = [(k.lower(), v) for k, v in response.headers.raw if k.lower() not in DROPPED]
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": out})  # fmt: skip
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


def _forwarded(scope: Scope) -> bool:
    return any(k.lower() == FORWARDED for k, _ in scope["headers"])


async def _body(receive: Receive) -> bytes:
    parts = []
    while True:
        message: Message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


__all__ = ["LeaderForward"]
