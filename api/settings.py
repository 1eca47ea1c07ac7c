"""API settings: passed to ``create_app``, never read from globals."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


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
    ``host``: the address the API binds; without a token, the admin routes answer only when it
    is a loopback one."""

    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    host: str = "127.0.0.1"

    @property
    def admin_open(self) -> bool:
        """Whether the admin routes may answer: behind the token, or on loopback only."""
        return bool(self.token) or is_loopback(self.host)

    def __repr__(self) -> str:  # never print the token
        return (
            f"ApiSettings(token={'set' if self.token else None}, cors={self.cors_origins}, "
            f"host={self.host!r})"
        )
