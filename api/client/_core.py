"""What ``Client`` and ``AsyncClient`` share: settings, retry decisions, and reading answers."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from weir.api.client._calls import Call
from weir.api.client._exceptions import (
    ApiError,
    InvalidURL,
    TransportError,
    Unavailable,
    error_for,
    retry_after_s,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
STREAM_READ_TIMEOUT_S = 45.0  # the server sends a comment after 15 s without an event


@dataclass(frozen=True, slots=True)
class Retries:
    """When a request that got 503 (or could not connect) is tried again. ``attempts``: tries
    in all, the first one included; ``total_s``: no wait may end later than this after the
    first try; ``backoff_s``: the first wait when the answer has no ``Retry-After`` (doubled
    each time). Requests that change the job (savepoints, backfills) are never retried."""

    attempts: int = 4
    total_s: float = 30.0
    backoff_s: float = 0.25

    def delay(self, attempt: int, retry_after: float | None, elapsed: float) -> float | None:
        """Seconds to wait before try ``attempt + 1``; None when the budget is spent."""
        if attempt + 1 >= self.attempts:
            return None
        wait = retry_after if retry_after is not None else self.backoff_s * 2**attempt
        return wait if elapsed + wait <= self.total_s else None


@dataclass(frozen=True, slots=True)
class Reconnect:
    """How ``stream()`` reconnects after the server went away. ``attempts``: reconnects in a
    row without an event; ``total_s``: the longest it keeps trying without one; waits follow the
    server's ``retry`` (2 s), capped at ``max_delay_s``."""

    attempts: int = 10
    total_s: float = 60.0
    max_delay_s: float = 5.0


class Reconnecting:
    """One stream's reconnect state, kept the same way by ``Client`` and ``AsyncClient``: the
    wait the server asked for (``retry``), and the failures since the last event."""

    def __init__(self, bounds: Reconnect, path: str) -> None:
        self._bounds, self._path = bounds, path
        self._delay, self._failures, self._since = 2.0, 0, time.monotonic()

    def saw(self, retry_ms: int | None, has_data: bool) -> None:
        """An event arrived: its ``retry`` sets the wait; one with data resets the count."""
        if retry_ms is not None:
            self._delay = retry_ms / 1000
        if has_data:
            self._failures, self._since = 0, time.monotonic()

    def wait_after(self, cause: BaseException | None) -> float:
        """The stream ended (``cause``: why, if known): seconds to wait before reconnecting;
        ``TransportError`` once the bounds are spent."""
        self._failures += 1
        bounds = self._bounds
        if self._failures > bounds.attempts or time.monotonic() - self._since > bounds.total_s:
            raise gave_up(self._path, self._failures - 1, cause) from cause
        return min(self._delay, bounds.max_delay_s)


def checked_url(base_url: str) -> str:
    """``base_url`` if it is ``http(s)://HOST[:PORT][/PREFIX]``; else ``InvalidURL`` naming the
    URL it probably meant (``127.0.0.1:8000`` is ``http://127.0.0.1:8000``)."""
    parts = urlsplit(base_url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return base_url
    if "://" not in base_url:
        raise InvalidURL(
            f"Client({base_url!r}): the URL has no scheme; use http://{base_url.lstrip('/')} "
            "(or https://)"
        )
    raise InvalidURL(
        f"Client({base_url!r}): the URL is not http(s)://HOST[:PORT]; e.g. {DEFAULT_URL}"
    )


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def timeout_for(call: Call[Any], timeout_s: float) -> httpx.Timeout:
    return httpx.Timeout(timeout_s + call.wait_s)


def stream_timeout(timeout_s: float) -> httpx.Timeout:
    return httpx.Timeout(timeout_s, read=STREAM_READ_TIMEOUT_S)


def body_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def answer(call: Call[T], response: httpx.Response) -> T:
    """The parsed answer; raises the error the answer is."""
    if response.status_code in call.ok:
        return call.parse(response.json())
    raise error_for(response.status_code, body_of(response), response.headers.get("retry-after"))


def retry_delay(
    call: Call[Any],
    response: httpx.Response | None,
    exc: httpx.TransportError | None,
    retries: Retries,
    attempt: int,
    elapsed: float,
) -> float:
    """After a try that did not answer: the wait before the next one, or the error to raise
    (the answer's, or a ``TransportError``) when it is not retried or the budget is spent."""
    if response is not None:
        error: ApiError | TransportError = error_for(
            response.status_code, body_of(response), response.headers.get("retry-after")
        )
        retryable = response.status_code == 503
        hint = retry_after_s(response.headers.get("retry-after"))
    else:
        error = TransportError(
            f"{call.method} {call.path} failed: {type(exc).__name__}: {exc}; is the weir API "
            "running at this base URL?"
        )
        retryable = isinstance(exc, httpx.ConnectError)
        hint = None
    delay = retries.delay(attempt, hint, elapsed) if call.retry and retryable else None
    if delay is None:
        raise error from exc
    log.info("retrying path=%s attempt=%d delay_s=%.2f", call.path, attempt + 1, delay)
    return delay


def gave_up(path: str, failures: int, cause: BaseException | None) -> TransportError:
    why = f"{type(cause).__name__}: {cause}" if cause else "the server closed the stream"
    return TransportError(
        f"stream {path} gave up after {failures} reconnects without an event ({why}); is the "
        "weir API running? raise Reconnect(attempts=, total_s=) to wait longer"
    )


def refused(response: httpx.Response) -> Unavailable:
    """A stream the server did not open: a 503 (too many streams) is retried like a broken
    connection; any other error is raised at once."""
    error = error_for(response.status_code, body_of(response), response.headers.get("retry-after"))
    if isinstance(error, Unavailable):
        return error
    raise error
