"""API settings: passed to ``create_app``, never read from globals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """``token``: when set, every route but ``/health`` needs ``Authorization: Bearer <token>``
    (``WEIR_API_TOKEN``). ``cors_origins``: origins allowed to call the API from a browser."""

    token: str | None = None
    cors_origins: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never print the token
        return f"ApiSettings(token={'set' if self.token else None}, cors={self.cors_origins})"
