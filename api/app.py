"""The FastAPI application: one router per area, the registry as app state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api import errors
from api.registry import Registry
from api.routes import dashboard, jobs, state


def create_app(registry: Registry) -> FastAPI:
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
    app.include_router(jobs.router)
    app.include_router(dashboard.router)
    app.include_router(state.router)  # last: its path pattern is the most general
    return app
