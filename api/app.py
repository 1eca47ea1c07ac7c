"""The FastAPI application: one router per area, the registry as app state.

Access rule (README, "Security"): with a token (``WEIR_API_TOKEN``) every route but ``/health``
needs it. Without one, the read routes are open and the admin routes (tagged ``admin``, the only
ones that change anything) answer only when the API is bound to a loopback address. Either way,
an admin request that a browser sends from a page of another origin than ``--cors-origins``
is refused (a page the user visits cannot take savepoints through a local API).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from weir import __version__
from weir.api import errors, metrics
from weir.api.registry import Registry
from weir.api.routes import admin, dashboard, jobs, state, top
from weir.api.settings import ApiSettings

OPEN_PATHS = frozenset({"/health"})


def create_app(registry: Registry, settings: ApiSettings | None = None) -> FastAPI:
    settings = settings or ApiSettings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        registry.close()

    app = FastAPI(
        title="weir",
        summary="Queryable state of weir stream jobs",
        version=__version__,
        lifespan=lifespan,
    )
    app.state.registry = registry
    errors.install(app)
    metrics.install(app, registry)
    if settings.token:
        _require_token(app, settings.token)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "If-None-Match", "Content-Type"],
            expose_headers=["ETag"],
        )
    app.include_router(jobs.router)
    app.include_router(admin.router)
    app.include_router(dashboard.router)
    app.include_router(top.router)
    app.include_router(state.router)  # last: its path pattern is the most general
    app.add_middleware(
        GuardAdmin,
        routes=admin_routes(),
        open_=settings.admin_open,
        host=settings.host,
        origins=frozenset(settings.cors_origins),
    )
    return app


def admin_routes() -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """The admin router's routes (included without a prefix): path patterns and methods."""
    return [
        (r.path_regex, frozenset(r.methods or ()))
        for r in admin.router.routes
        if isinstance(r, APIRoute)
    ]


def _require_token(app: FastAPI, token: str) -> None:
    app.add_middleware(RequireToken, expected=f"Bearer {token}".encode())


class RequireToken:
    """Every route but ``OPEN_PATHS`` (and CORS preflights) needs the bearer token."""

    def __init__(self, app: ASGIApp, expected: bytes) -> None:
        self.app = app
        self.expected = expected

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": {"code": "unauthorized",
                       "message": "this API needs 'Authorization: Bearer <token>' "
                                  "(the token weir was started with, WEIR_API_TOKEN)"}},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip
        await response(scope, receive, send)


class GuardAdmin:
    """Refuses admin requests (403, JSON) when ``open_`` is false (no token, not on loopback)
    or when they carry an ``Origin`` header that ``origins`` does not hold."""

    def __init__(
        self,
        app: ASGIApp,
        routes: list[tuple[re.Pattern[str], frozenset[str]]],
        open_: bool,
        host: str,
        origins: frozenset[str],
    ) -> None:
        self.app = app
        self.routes = routes
        self.open = open_
        self.host = host
        self.origins = origins

    def _is_admin(self, scope: Scope) -> bool:
        return any(
            scope["method"] in methods and pattern.match(scope["path"])
            for pattern, methods in self.routes
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._is_admin(scope):
            await self.app(scope, receive, send)
            return
        what = f"{scope['method']} {scope['path']}"
        origin = dict(scope["headers"]).get(b"origin")
        if origin is not None and origin.decode("latin-1") not in self.origins:
            code, message = (
                "cross_origin_refused",
                f"{what} changes the job and was sent by a page of origin "
                f"{origin.decode('latin-1')!r}; only --cors-origins may send admin requests",
            )
        elif not self.open:
            code, message = (
                "admin_needs_token",
                f"{what} changes the job: without a token, admin routes answer only on an API "
                f"bound to loopback, and this one is bound to {self.host}; start it with "
                "WEIR_API_TOKEN set",
            )
        else:
            await self.app(scope, receive, send)
            return
        response = JSONResponse({"error": {"code": code, "message": message}}, status_code=403)
        await response(scope, receive, send)
