"""The FastAPI application: one router per area, the registry as app state."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api import errors, metrics
from api.registry import Registry
from api.routes import admin, dashboard, jobs, state, top
from api.settings import ApiSettings

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
        version="0.1.0",
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
    return app


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
