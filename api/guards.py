"""Pure ASGI guards in front of the routes: who may reach the API, and how much one request or
one client may hold. Each answers a refusal itself, as JSON, before any route runs.

- ``AllowedHosts``: the ``Host`` header must name this server (loopback names, the bound
  address, ``--allowed-hosts``). A page of attacker.example whose name the attacker re-points
  to 127.0.0.1 (DNS rebinding) reaches a loopback API as same-origin, but its requests still
  say ``Host: attacker.example``.
- ``HealthOnly``: an API bound off loopback without a token serves ``/health`` and nothing else.
- ``BodyCap``: a declared ``Content-Length`` over the cap is refused before a byte is read; a
  chunked body is cut where it passes the cap.
- ``StreamCap``: at most N event streams at once; one more gets 503 with ``Retry-After``.

They are plain ASGI callables, not ``BaseHTTPMiddleware``: that costs a task and a memory
stream per request on the query route.
"""

from __future__ import annotations

import logging
import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from weir.api.errors import error_response

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
OPEN_PATHS = frozenset({"/health"})
STREAM_RETRY_AFTER_S = 5
ALLOWED_SEEN = 64  # Host headers ``AllowedHosts`` remembers as allowed


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port or IPv6 brackets, in lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header[1:]
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header


def allowed_hosts(bound: str, extra: tuple[str, ...]) -> frozenset[str]:
    """The names a request's ``Host`` may carry: loopback's, the bound address (a wildcard
    such as 0.0.0.0 too: no rebinding page can be served from it) and ``extra``."""
    names = LOOPBACK_NAMES | {host_name(h) for h in (bound, *extra)}
    return frozenset(names - {""})


class HostNames:
    """Whether a raw ``Host`` header names this server: its host (``host_name``) is one of
    ``names``. The headers seen allowed, as sent (a client sends the same one on every request),
    are remembered: one lookup instead of parsing it again; bounded, so a client varying it
    cannot grow it, and a refused one is never kept."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self._allowed: set[bytes] = set()

    def allows(self, raw: bytes) -> bool:
        """Whether ``raw`` (a ``Host`` header's value) names this server."""
        if raw in self._allowed:
            return True
        if host_name(raw.decode("latin-1")) not in self.names:
            return False
        if len(self._allowed) < ALLOWED_SEEN:
            self._allowed.add(raw)
        return True


class AllowedHosts:
    """Refuses (421, JSON) a request whose ``Host`` is not in ``names``. A request without a
    ``Host`` passes: browsers, the clients a rebinding page drives, always send one."""

    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app = app
        self.hosts = HostNames(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = _header(scope, b"host")
        if raw is None or self.hosts.allows(raw):
            await self.app(scope, receive, send)
            return
        given, names = raw.decode("latin-1"), ", ".join(sorted(self.hosts.names))
        response = error_response(
            421,
            "host_not_allowed",
            f"Host {given!r} is not a name of this API (allowed: {names}); "
            f"if clients reach it by that name, start it with --allowed-hosts "
            f"{host_name(given)} (WEIR_ALLOWED_HOSTS, a comma-separated list)",
        )
        await response(scope, receive, send)


class HealthOnly:
    """Every route but ``/health`` answers 403: the API is bound to ``host``, which others can
    reach, and no token guards it."""

    def __init__(self, app: ASGIApp, host: str) -> None:
        self.app = app
        self.host = host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        response = error_response(
            403,
            "needs_token",
            f"this API is bound to {self.host}, reachable from other machines, and has no "
            "token, so it serves only /health; set WEIR_API_TOKEN (and send "
            "'Authorization: Bearer <token>'), or bind it to 127.0.0.1",
        )
        await response(scope, receive, send)


class BodyCap:
    """No request body over ``limit`` bytes is read: a larger ``Content-Length`` is a 413 at
    once; a chunked body raises a 413 ``HTTPException`` from ``receive`` where it passes the
    cap, which the route's body parsing re-raises to the error handlers."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = None, False
        for key, value in scope["headers"]:
            if key == b"content-length" and declared is None:
                declared = bytes(value)
            elif key == b"transfer-encoding":
                chunked = True
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            response = error_response(
                413, "body_too_large", self._message(declared.decode("latin-1"))
            )
            await response(scope, receive, send)
            return
        if declared is None and not chunked:  # HTTP/1.1 without either has no body to cap
            await self.app(scope, receive, send)
            return
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, self._message(f"more than {self.limit}"))
            return message

        await self.app(scope, capped, send)

    def _message(self, size: str) -> str:
        return (
            f"a request body of {size} bytes is over this API's limit of {self.limit} bytes; "
            "send fewer keys per lookup"
        )


class StreamCap:
    """At most ``limit`` requests matching ``pattern`` (the event stream route) at once: each
    holds a connection and a descriptor for as long as its client stays."""

    def __init__(self, app: ASGIApp, pattern: re.Pattern[str], limit: int) -> None:
        self.app = app
        self.pattern = pattern
        self.limit = limit
        self.open = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.pattern.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.open >= self.limit:
            log.warning("event stream refused open=%d limit=%d", self.open, self.limit)
            response = error_response(
                503,
                "too_many_streams",
                f"this API serves at most {self.limit} event streams at once and all are "
                f"open; retry in {STREAM_RETRY_AFTER_S} s, or raise --max-streams",
                headers={"Retry-After": str(STREAM_RETRY_AFTER_S)},
            )
            await response(scope, receive, send)
            return
        self.open += 1  # one event loop: no lock needed between the check and this
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1
