"""``weir.client`` against small FastAPI stubs served by uvicorn on loopback: retries on 503
(with ``Retry-After``, bounded in attempts and time, never for a savepoint), errors raised by
status and code (``NotFreshEnough`` with the current watermark and checkpoint), and the
``windows/{start}`` listing paged by cursor (the route of the issue-20 contract; this stub plays
it) in ``Client`` and ``AsyncClient``, with ``to_pandas``."""

from __future__ import annotations

import asyncio
import re
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Query, Response
from fastapi.responses import JSONResponse

from tests.support.http_stub import free_port, served
from weir.client import (
    AsyncClient,
    BadRequest,
    Client,
    InvalidURL,
    NotFound,
    NotFreshEnough,
    Retries,
    TransportError,
    Unavailable,
    WeirClientError,
    WindowKey,
    to_pandas,
)

KEYS = [f"k{i}" for i in range(7)]
JOBS = {"jobs": [{"name": "j", "state": "running", "parallelism": 1, "operators": ["op"]}]}


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"error": {"code": code, "message": message}, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


def stub() -> FastAPI:
    app = FastAPI()
    app.state.tries = {"jobs": 0, "savepoint": 0, "busy": 0}
    app.state.fail_jobs = 2

    @app.get("/jobs")
    def jobs() -> Response:
        app.state.tries["jobs"] += 1
        if app.state.tries["jobs"] <= app.state.fail_jobs:
            return _error(503, "state_unavailable", "retry shortly", headers={"Retry-After": "0"})
        return JSONResponse(JOBS)

    @app.get("/jobs/{job}")
    def busy(job: str) -> Response:
        app.state.tries["busy"] += 1
        retry = "0" if job == "soon" else "3600"
        return _error(503, "state_unavailable", "busy", headers={"Retry-After": retry})

    @app.post("/jobs/{job}/savepoints")
    def savepoint(job: str) -> Response:
        app.state.tries["savepoint"] += 1
        return _error(503, "state_unavailable", "busy", headers={"Retry-After": "0"})

    @app.get("/{job}/{op}/windows/{start}")
    def window_keys(
        job: str,
        op: str,
        start: int,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: str | None = None,
        min_watermark: int | None = None,
    ) -> Response:
        if op == "sessions":
            return _error(400, "not_supported", "session windows have no fixed starts")
        if job != "j":
            return _error(404, "job_not_found", f"job {job!r} not found")
        if min_watermark is not None and min_watermark > 5_000:
            return _error(409, "not_fresh_enough", "still at 5000", watermark=5_000, checkpoint=3)
        if cursor is not None and not cursor.isdigit():
            return _error(400, "invalid_cursor", f"cursor {cursor!r} is not one this API gave")
        at = int(cursor or 0)
        page = KEYS[at : at + limit]
        rows = [{"key": k, "key_group": i, "n": i, "final": True} for i, k in enumerate(page)]
        nxt = str(at + limit) if at + limit < len(KEYS) else None
        return JSONResponse(
            {"job": job, "op": op, "start": start, "end": start + 1000, "watermark": 5_000,
             "checkpoint": 3, "consistency": "live", "keys": rows, "next_cursor": nxt}
        )  # fmt: skip

    return app


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return stub()


@pytest.fixture(scope="module")
def url(app: FastAPI) -> Iterator[str]:
    with served(app) as base:
        yield base


def test_a_503_is_retried_as_retry_after_says_until_it_answers(app: FastAPI, url: str) -> None:
    app.state.tries["jobs"], app.state.fail_jobs = 0, 2
    with Client(url, retries=Retries(attempts=3)) as client:
        assert client.jobs().jobs[0].operators == ["op"]
    assert app.state.tries["jobs"] == 3


def test_retries_are_bounded_in_attempts_and_in_time(app: FastAPI, url: str) -> None:
    with Client(url, retries=Retries(attempts=3, total_s=30)) as client:
        app.state.tries["busy"] = 0
        with pytest.raises(Unavailable, match="busy") as caught:
            client.job("soon")
        assert app.state.tries["busy"] == 3 and caught.value.retry_after == 0
        app.state.tries["busy"] = 0
        t0 = time.monotonic()
        with pytest.raises(Unavailable) as caught:  # Retry-After past total_s: no wait at all
            client.job("later")
        assert app.state.tries["busy"] == 1 and time.monotonic() - t0 < 5
        assert caught.value.retry_after == 3600 and caught.value.code == "state_unavailable"


def test_a_savepoint_is_never_retried(app: FastAPI, url: str) -> None:
    app.state.tries["savepoint"] = 0
    with Client(url) as client, pytest.raises(Unavailable):
        client.savepoint("j")
    assert app.state.tries["savepoint"] == 1


def test_a_refused_connection_is_a_transport_error_after_the_retries() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", retries=Retries(2, backoff_s=0.01)) as client:
        with pytest.raises(TransportError, match="is the weir API running"):
            client.jobs()


def test_window_keys_iterates_every_page_in_key_order(url: str) -> None:
    with Client(url) as client:
        rows = client.window_keys("j", "op", 60_000, page_size=3)
        pages = list(rows.pages())
        assert [len(p.keys) for p in pages] == [3, 3, 1]
        assert [p.next_cursor for p in pages] == ["3", "6", None]
        found = list(rows)
        assert [r.key for r in found] == KEYS
        assert all(isinstance(r, WindowKey) and r.final for r in found)
        assert found[2].model_extra == {"n": 2}
        frame = rows.to_pandas()
        assert list(frame["key"]) == KEYS and list(frame["n"]) == [0, 1, 2, 0, 1, 2, 0]
        assert list(to_pandas(pages[0])["key"]) == KEYS[:3]


def test_errors_are_raised_by_status_and_code(url: str) -> None:
    with Client(url) as client:
        with pytest.raises(BadRequest, match="no fixed starts") as bad:
            list(client.window_keys("j", "sessions", 0))
        assert bad.value.status == 400 and bad.value.code == "not_supported"
        with pytest.raises(NotFound, match="job 'nope' not found") as missing:
            list(client.window_keys("nope", "op", 0))
        assert missing.value.code == "job_not_found"
        with pytest.raises(NotFreshEnough, match="still at 5000") as stale:
            list(client.window_keys("j", "op", 0, min_watermark=9_000, timeout_ms=10))
        assert (stale.value.watermark, stale.value.checkpoint, stale.value.status) == (5000, 3, 409)
        with pytest.raises(BadRequest, match="limit"):
            list(client.window_keys("j", "op", 0, page_size=0))


def test_the_async_client_pages_and_raises_the_same(app: FastAPI, url: str) -> None:
    async def main() -> None:
        app.state.tries["jobs"], app.state.fail_jobs = 0, 1
        async with AsyncClient(url) as client:
            assert (await client.jobs()).jobs[0].name == "j"
            rows = client.window_keys("j", "op", 0, page_size=2)
            assert [r.key async for r in rows] == KEYS
            assert list((await rows.to_pandas())["key"]) == KEYS
            with pytest.raises(NotFreshEnough) as stale:
                [r async for r in client.window_keys("j", "op", 0, min_watermark=6_000)]
            assert stale.value.watermark == 5_000
        assert app.state.tries["jobs"] == 2

    asyncio.run(main())


def test_to_pandas_without_pandas_names_the_install(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(url) as client:
        rows = client.window_keys("j", "op", 0)
        monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` meets without it
        with pytest.raises(WeirClientError, match=r"needs pandas.*pip install pandas"):
            rows.to_pandas()


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("127.0.0.1:8000", "use http://127.0.0.1:8000 (or https://)"),
        ("localhost:8000/", "use http://localhost:8000/ (or https://)"),
        ("ftp://h:1", "is not http(s)://HOST[:PORT]; e.g. http://127.0.0.1:8000"),
        ("http://", "is not http(s)://HOST[:PORT]"),
    ],
)
def test_a_url_the_client_cannot_use_is_refused_when_it_is_made(url: str, fix: str) -> None:
    """Issue 39 item 11: not at the first call, with a hint that the API may be down."""
    for make in (Client, AsyncClient):
        with pytest.raises(InvalidURL, match=re.escape(fix)):
            make(url)
    assert issubclass(InvalidURL, ValueError) and issubclass(InvalidURL, WeirClientError)


def test_client_errors_go_by_their_public_names() -> None:
    """A traceback names ``weir.client.NotFound``, not the private module that defines it."""
    import weir.client

    for name in weir.client.__all__:
        cls = getattr(weir.client, name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            assert cls.__module__ == "weir.client", name
    shown = traceback.format_exception_only(NotFound(404, "job_not_found", "no job 'x'"))
    assert shown == ["weir.client.NotFound: no job 'x'\n"]
