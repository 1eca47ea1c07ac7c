"""API settings: passed to ``create_app``, never read from globals. ``API_SETTINGS`` declares
the ones a user sets (``weir.base.settings``): the flags and variables of ``weir run``,
``weir demo``, ``weir sql`` and ``weir api`` and their reference rows are made from them."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from weir.base.settings import Setting, WholeNumber

MAX_BODY_BYTES = 1 << 20  # a lookup of 1,000 keys of up to 1 KB each; a backfill request is tiny
MAX_STREAMS = 256
MAX_CONNECTIONS = 1024
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
SERVED = ("run", "sql", "demo", "api")

API_SETTINGS: tuple[Setting, ...] = (
    Setting("api_host", "address the HTTP API binds (without a token, an API off loopback "
            "serves only /health)", DEFAULT_HOST, metavar="H", commands=SERVED),
    Setting("api_token", "bearer token every route but /health then requires (prefer the "
            "environment variable: a flag shows in the process list)", metavar="TOKEN",
            secret=True, commands=SERVED),
    Setting("cors_origins", "comma-separated origins allowed to call the API from a browser",
            metavar="ORIGINS", commands=SERVED),
    Setting("allowed_hosts", "comma-separated host names requests may carry in Host besides "
            "loopback's and the bound address (checked without a token, and with one when this "
            "is set)", metavar="HOSTS", commands=SERVED),
    Setting("max_connections", "HTTP connections waiting on their clients (for a request, "
            "its body, or to read a response) at most; past it the one waiting longest is "
            "closed", MAX_CONNECTIONS, WholeNumber(1), metavar="N", commands=SERVED),
    Setting("max_streams", "event streams (/state/{key}/stream) open at once at most; more get "
            "503 with Retry-After: 5 and JSON too_many_streams", MAX_STREAMS, WholeNumber(1),
            metavar="N", commands=SERVED),
    Setting("api_port", "port of the HTTP API (0: any free port; the chosen one is printed)",
            DEFAULT_PORT,
            WholeNumber(0, maximum=65535), metavar="P", commands=SERVED),
)  # fmt: skip


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the API reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: assume it is reachable from elsewhere


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """``token``: when set, every route but ``/health`` needs ``Authorization: Bearer <token>``
    (``WEIR_API_TOKEN``). ``cors_origins``: origins allowed to call the API from a browser.
    ``host``: the address the API binds; without a token, an API bound off loopback serves
    only ``/health``. ``allowed_hosts``: more names a request's ``Host`` may carry (without a
    token, only loopback names and ``host`` are accepted; with one, any unless this is set).
    ``max_body_bytes``, ``max_streams``: what one request and the event streams together may
    hold; ``max_connections``: connections waiting on their clients at once (``app.http_guard``
    closes the one waiting longest past it)."""

    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    host: str = DEFAULT_HOST
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    max_streams: int = MAX_STREAMS
    max_connections: int = MAX_CONNECTIONS

    @property
    def guarded(self) -> bool:
        """Whether a token or a loopback bind guards the API; an unguarded one serves only
        ``/health``."""
        return bool(self.token) or is_loopback(self.host)

    @property
    def checks_host(self) -> bool:
        """Whether requests must name an allowed host: always without a token (the token is
        what a rebinding page cannot send), and with one when hosts were configured."""
        return not self.token or bool(self.allowed_hosts)

    def __repr__(self) -> str:  # never print the token
        return (
            f"ApiSettings(token={'set' if self.token else None}, cors={self.cors_origins}, "
            f"host={self.host!r}, allowed_hosts={self.allowed_hosts})"
        )
