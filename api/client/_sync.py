"""``Client``: the weir API over a blocking ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
from httpx_sse import connect_sse

from weir.api.client import _calls as calls
from weir.api.client._calls import (
    Call,
    Consistency,
    LookupMiss,
    StreamEvent,
    Window,
    to_pandas,
)
from weir.api.client._core import (
    DEFAULT_URL,
    Reconnect,
    Reconnecting,
    Retries,
    answer,
    auth_headers,
    checked_url,
    refused,
    retry_delay,
    stream_timeout,
    timeout_for,
)
from weir.api.models import (
    BroadcastAnswer,
    CheckpointList,
    Health,
    JobDetail,
    JobsAnswer,
    SavepointAnswer,
    SqlAnswer,
    StateAnswer,
    TopAnswer,
    WindowKey,
    WindowKeys,
)

T = TypeVar("T")


class WindowRows:
    """The keys of one window, fetched a page at a time as they are iterated."""

    def __init__(self, fetch: Callable[[str | None], WindowKeys]) -> None:
        self._fetch = fetch

    def pages(self) -> Iterator[WindowKeys]:
        """The listing a page at a time, each as the API answered it, fetched as iterated."""
        cursor: str | None = None
        while True:
            page = self._fetch(cursor)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def __iter__(self) -> Iterator[WindowKey]:
        for page in self.pages():
            yield from page.keys

    def to_pandas(self) -> Any:
        """Every page's rows in one ``pandas.DataFrame`` (needs pandas)."""
        return to_pandas(list(self))


class Client:
    """A blocking client of one weir API. ``token``: the API's ``WEIR_API_TOKEN``;
    ``timeout``: seconds per request (a freshness wait is added to it); ``retries``: for 503
    answers and refused connections; ``reconnect``: for ``stream()``. Use it as a context
    manager, or ``close()`` it."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: Retries | None = None,
        reconnect: Reconnect | None = None,
        trust_env: bool = True,
    ) -> None:
        self.timeout = timeout
        self.retries = retries or Retries()
        self.reconnect = reconnect or Reconnect()
        self._http = httpx.Client(
            base_url=checked_url(base_url),
            headers=auth_headers(token),
            timeout=timeout,
            trust_env=trust_env,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (``with Client(...) as weir:`` does it at the end)."""
        self._http.close()

    def _run(self, call: Call[T]) -> T:
        started = time.monotonic()
        attempt = 0
        while True:
            response: httpx.Response | None = None
            failure: httpx.TransportError | None = None
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    timeout=timeout_for(call, self.timeout),
                )
            except httpx.TransportError as exc:
                failure = exc
            if response is not None and response.status_code in call.ok:
                return answer(call, response)
            elapsed = time.monotonic() - started
            time.sleep(retry_delay(call, response, failure, self.retries, attempt, elapsed))
            attempt += 1

    def health(self) -> Health:
        """``GET /health``: also when it is 503 (a job failed: ``status == "failed"``)."""
        return self._run(calls.health())

    def jobs(self) -> JobsAnswer:
        """Every job this API serves, with its state, parallelism and operators (``GET /jobs``)."""
        return self._run(calls.jobs())

    def job(self, job: str) -> JobDetail:
        """One job's detail (``GET /jobs/{job}``): source, workers and their key groups,
        watermark, records, dead letters, and each operator's counters.

        Raises:
            NotFound: no job of that name (``job_not_found``).
        """
        return self._run(calls.job(job))

    def checkpoints(self, job: str) -> CheckpointList:
        """The job's complete checkpoints and savepoints, newest first
        (``GET /jobs/{job}/checkpoints``).

        Raises:
            NotFound: no job of that name (``job_not_found``).
        """
        return self._run(calls.checkpoints(job))

    def savepoint(self, job: str, *, timeout_ms: int = 120_000) -> SavepointAnswer:
        """Take a savepoint and wait for it (never retried: it changes the job)."""
        return self._run(calls.savepoint(job, timeout_ms))

    def backfill(
        self, job: str, op: str, path: str, min_end: int, max_end: int, windows: int | None = None
    ) -> dict[str, Any]:
        """Load ``weir backfill``'s SST files at ``path`` into the running job."""
        body = {"op": op, "path": path, "min_end": min_end, "max_end": max_end, "windows": windows}
        return self._run(calls.backfill(job, body))

    def state(
        self,
        job: str,
        op: str,
        key: str | None,
        *,
        start: int | None = None,
        to: int | None = None,
        limit: int | None = None,
        consistency: Consistency = "live",
        min_watermark: int | None = None,
        min_checkpoint: int | None = None,
        timeout_ms: int | None = None,
    ) -> StateAnswer:
        """A key's windows with starts in ``[start, to]`` (the route's ``from``/``to``), the
        newest ``limit`` (``key=None``: the NULL key, SQL's group of a NULL); with
        ``min_watermark``/``min_checkpoint``, once the state reached them (``NotFreshEnough``
        after ``timeout_ms``)."""
        call = calls.state(job, op, key, from_=start, to=to, limit=limit, consistency=consistency,
                           min_watermark=min_watermark, min_checkpoint=min_checkpoint,
                           timeout_ms=timeout_ms)  # fmt: skip
        return self._run(call)

    def keys(self, job: str, op: str, *, prefix: str = "", page_size: int = 100) -> Iterator[str]:
        """Every key the operator holds state for (starting with ``prefix``), page by page."""
        cursor: str | None = None
        while True:
            page = self._run(calls.keys_page(job, op, prefix, cursor, page_size))
            yield from page.keys
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def lookup(
        self,
        job: str,
        op: str,
        keys: list[str | None],
        *,
        start: int | None = None,
        to: int | None = None,
        limit: int | None = None,
        consistency: Consistency = "live",
        min_watermark: int | None = None,
        min_checkpoint: int | None = None,
        timeout_ms: int | None = None,
    ) -> list[StateAnswer | LookupMiss]:
        """Many keys in one request, in the order asked: an answer, or a ``LookupMiss``."""
        call = calls.lookup(job, op, keys, from_=start, to=to, limit=limit, consistency=consistency,
                           min_watermark=min_watermark, min_checkpoint=min_checkpoint,
                           timeout_ms=timeout_ms)  # fmt: skip
        return self._run(call)

    def sql(self, job: str, query: str, **options: Any) -> SqlAnswer:
        """A pull query, one read-only ``SELECT`` over the job's operators (``POST /{job}/sql``);
        keywords: ``consistency``, ``budget``, ``cursor`` (a page's ``next_cursor``),
        ``min_watermark``, ``min_checkpoint``, ``timeout_ms``."""
        return self._run(calls.sql(job, query, **options))

    def broadcast_state(
        self,
        job: str,
        op: str,
        *,
        consistency: Consistency = "live",
        min_watermark: int | None = None,
        min_checkpoint: int | None = None,
        timeout_ms: int | None = None,
    ) -> BroadcastAnswer:
        """A keyed broadcast operator's broadcast states (every worker holds the same)."""
        return self._run(
            calls.broadcast_state(job, op, consistency, min_watermark, min_checkpoint, timeout_ms)
        )

    def top(
        self,
        job: str,
        op: str,
        by: str,
        *,
        n: int = 10,
        window: Window = "latest",
        min_watermark: int | None = None,
        min_checkpoint: int | None = None,
        timeout_ms: int | None = None,
    ) -> TopAnswer:
        """The top ``n`` keys of a window by one aggregate, highest first (``GET …/top``).

        Args:
            job: the job's name.
            op: the window operator's name.
            by: the aggregate to rank by, e.g. ``"count"``.
            n: how many keys, 1 to 100.
            window: ``"latest"`` (the last window fired) or ``"current"`` (the newest open).
            min_watermark: wait until the state's watermark is at least this (event-time ms).
            min_checkpoint: wait until the state is at least this checkpoint.
            timeout_ms: how long to wait for those bounds.

        Returns:
            The window and its keys with their values.

        Raises:
            NotFound: no such job or operator, or no window yet (``window_not_found``).
            BadRequest: ``by`` is no aggregate of the operator, or it has no top-N.
            NotFreshEnough: the bounds were not met in time.
        """
        return self._run(
            calls.top(job, op, by, n, window, min_watermark, min_checkpoint, timeout_ms)
        )

    def window_keys(
        self,
        job: str,
        op: str,
        start: int,
        *,
        page_size: int = 100,
        consistency: Consistency = "live",
        min_watermark: int | None = None,
        min_checkpoint: int | None = None,
        timeout_ms: int | None = None,
    ) -> WindowRows:
        """Every key with a window starting at ``start``, by key; pages are fetched as the
        result is iterated (``.pages()`` gives them whole, ``.to_pandas()`` a DataFrame)."""

        def fetch(cursor: str | None) -> WindowKeys:
            return self._run(
                calls.window_page(
                    job,
                    op,
                    start,
                    cursor,
                    page_size,
                    consistency,
                    min_watermark,
                    min_checkpoint,
                    timeout_ms,
                )  # fmt: skip
            )

        return WindowRows(fetch)

    def stream_token(self, job: str | None = None, *, ttl_s: int | None = None) -> dict[str, Any]:
        """``{"token", "expires_at"}``: opens the event streams (of ``job`` only, when given)
        as ``?access_token=``, for clients that cannot send headers (a browser's EventSource)."""
        return self._run(calls.stream_token(job, ttl_s))

    def stream(
        self,
        job: str,
        op: str,
        key: str | None,
        *,
        limit: int | None = None,
        interval_ms: int | None = None,
        last_event_id: str | None = None,
    ) -> Iterator[StreamEvent]:
        """The key's answer each time it changes (Server-Sent Events). When the server goes
        away the stream reconnects with ``Last-Event-ID`` (so no answer is given twice), within
        ``reconnect``'s bounds; then ``TransportError``."""
        path = calls.stream_path(job, op, key)
        params = {k: v for k, v in (("limit", limit), ("interval_ms", interval_ms)) if v}
        state = Reconnecting(self.reconnect, path)
        timeout = stream_timeout(self.timeout)
        while True:
            headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
            cause: BaseException | None = None
            try:
                with connect_sse(
                    self._http, "GET", path, params=params, headers=headers, timeout=timeout
                ) as source:
                    response = source.response
                    if response.status_code != 200:
                        response.read()
                        cause = refused(response)
                    else:
                        for sse in source.iter_sse():
                            state.saw(sse.retry, bool(sse.data))
                            if not sse.data:
                                continue
                            last_event_id = sse.id or last_event_id
                            yield calls.stream_event(sse.id, sse.data, sse.event)
            except httpx.TransportError as exc:
                cause = exc
            time.sleep(state.wait_after(cause))


__all__ = ["Client", "WindowRows"]
