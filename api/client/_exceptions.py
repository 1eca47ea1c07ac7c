"""The errors ``weir.client`` raises: the API's error answers, and failing to reach it.

    WeirClientError            (root; itself a ``WeirError``)
    ├── InvalidURL             a base URL that is not http(s)://HOST[:PORT] (also a ValueError)
    ├── TransportError         the API could not be reached, or the connection broke
    └── ApiError               the API answered with an error: ``status``, ``code``, ``message``
        ├── BadRequest         400 and 422: a parameter the route refuses (``message`` says which)
        ├── Unauthorized       401: no token, a wrong one, or an expired stream token
        ├── Forbidden          403: the API serves only /health, or refuses a cross-origin admin
        ├── NotFound           404: no such job, operator, key or window
        ├── Conflict           409: the job refused an operation (a savepoint, a backfill)
        │   └── NotFreshEnough 409 ``not_fresh_enough``: the state did not reach
        │                      ``min_watermark``/``min_checkpoint`` in time; carries the
        │                      current ``watermark`` and ``checkpoint``
        ├── Unavailable        503: still so after the client's retries; ``retry_after`` in s
        └── ServerError        500 and any other 5xx

They are public as ``weir.client.<Name>`` (their ``__module__``), which is how a traceback
names them. Every ``ApiError`` keeps the server's ``code`` (e.g. ``key_not_found``) so callers
can branch on it without parsing messages, and its ``str()`` is the server's message, which
names the fix.
"""

from __future__ import annotations

from typing import Any

from weir.base.errors import WeirError


class WeirClientError(WeirError):
    """Root of everything ``weir.client`` raises."""


class InvalidURL(WeirClientError, ValueError):
    """A base URL the client cannot use: no ``http://`` or ``https://``, or no host. Raised when
    the client is made, not at its first call."""


class TransportError(WeirClientError):
    """The API could not be reached, or the connection broke mid-answer (after retries)."""


class ApiError(WeirClientError):
    """An error answer: ``{"error": {"code", "message"}}`` with an HTTP ``status``."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r})"


class BadRequest(ApiError):
    """400 or 422: the request names something the route refuses."""


class Unauthorized(ApiError):
    """401: the API needs ``Authorization: Bearer <token>`` (``Client(token=...)``)."""


class Forbidden(ApiError):
    """403: the API refuses this request whoever sends it (see ``message``)."""


class NotFound(ApiError):
    """404: no such job, operator, key or window (``code`` says which)."""


class Conflict(ApiError):
    """409: the job refused the operation."""


class NotFreshEnough(Conflict):
    """409 ``not_fresh_enough``: the served state stayed below the asked freshness until the
    timeout. ``watermark`` and ``checkpoint`` are the state's current ones."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: Any = None,
        watermark: int | None = None,
        checkpoint: int | None = None,
    ) -> None:
        super().__init__(status, code, message, body)
        self.watermark = watermark
        self.checkpoint = checkpoint


class Unavailable(ApiError):
    """503: the state (or a stream slot) was still unavailable after the client's retries."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, message, body)
        self.retry_after = retry_after


class ServerError(ApiError):
    """500 or another 5xx: the server failed to answer (its log says why)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
}


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the API sends whole seconds; an HTTP date is not used)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_for(status: int, body: Any, retry_after: str | None = None) -> ApiError:
    """The exception for an error answer: by ``code`` where one has its own class, else by
    status. A body that is not weir's error shape (a proxy's page) keeps its status."""
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        code = str(detail.get("code", f"http_{status}"))
        message = str(detail.get("message", ""))
    else:
        code, message = f"http_{status}", f"HTTP {status}: {str(body)[:200]}"
    if code == "not_fresh_enough":
        return NotFreshEnough(
            status, code, message, body, body.get("watermark"), body.get("checkpoint")
        )
    if status == 503:
        return Unavailable(status, code, message, body, retry_after_s(retry_after))
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(status, code, message, body)


# a traceback names a class by its module: show the public one, not this private module
for _cls in (
    WeirClientError,
    InvalidURL,
    TransportError,
    ApiError,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    NotFreshEnough,
    Unavailable,
    ServerError,
):
    _cls.__module__ = "weir.client"
