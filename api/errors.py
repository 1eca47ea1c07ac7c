"""Every error answer is ``{"error": {"code", "message"}}`` with a message naming the problem."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from weir.api.models import ErrorDetail
from weir.base.errors import StateError

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    """An error answer; ``extra`` fields go beside ``error`` (a 409 ``not_fresh_enough``
    carries the current watermark and checkpoint)."""

    def __init__(
        self, status: int, code: str, message: str, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def not_found(code: str, message: str) -> ApiError:
    return ApiError(404, code, message)


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    """The one shape of an error, in an answer or inside a stream's event."""
    return {"error": {"code": code, "message": message}}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error answer. A ``JSONResponse`` is an ASGI app too: the pure-ASGI guards
    ``await`` it with their ``scope, receive, send``."""
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def api_error_response(exc: ApiError) -> JSONResponse:
    """How an ``ApiError`` is answered, by the exception handler and by ``api.fastpath``."""
    if exc.extra:
        body = {**error_body(exc.code, exc.message), **exc.extra}
        return JSONResponse(body, status_code=exc.status)
    return error_response(exc.status, exc.code, exc.message)


def state_error_response(exc: StateError) -> JSONResponse:
    """State that is not there yet (a worker still creating it): 503, retry shortly."""
    return error_response(
        503, "state_unavailable", f"{exc}; retry shortly", headers={"Retry-After": "1"}
    )


# what CatchAll tells of each response: method, route template, status, seconds to its start
Observer = Callable[[str, str, int, float], None]


def install(app: FastAPI, observe: Observer | None = None) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return api_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "path"))
            parts.append(f"{where}: {err.get('msg')}")
        return error_response(422, "invalid_request", "; ".join(parts))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else f"http_{exc.status_code}"
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(StateError)
    async def _state(_: Request, exc: StateError) -> JSONResponse:
        return state_error_response(exc)

    app.add_middleware(CatchAll, observe=observe)


class CatchAll:
    """Anything else is logged once and answered as a JSON 500 (an exception handler for
    ``Exception`` would re-raise after answering, and the server would drop the connection).
    ``observe`` hears of every response's start, that 500 too: the request metrics ride on
    the one ``send`` this wraps anyway, rather than on a middleware of their own. Pure ASGI:
    a ``BaseHTTPMiddleware`` costs a task and a stream per request."""

    def __init__(self, app: ASGIApp, observe: Observer | None = None) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        t0 = time.perf_counter()

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if self.observe is not None:
                    route = getattr(scope.get("route"), "path", None) or "unmatched"
                    seconds = time.perf_counter() - t0
                    self.observe(scope["method"], route, int(message["status"]), seconds)
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            log.exception("unhandled error path=%s", scope.get("path"))
            if started:
                raise
            response = error_response(
                500, "internal", f"{type(exc).__name__}: the server failed to answer"
            )
            await response(scope, receive, tracked)
