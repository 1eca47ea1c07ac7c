"""The FastAPI application: one router per area, the registry as app state.

Access rule (README, "Security"): with a token (``WEIR_API_TOKEN``) every route needs it but
``/health`` and the pages without data (the dashboard's, ``/docs``, ``/openapi.json``); the
event streams also take a stream token, which a page's ``EventSource`` can send. Without one, an
API bound off loopback serves only ``/health``, and one bound to loopback answers requests whose
``Host`` names it (loopback names, the bound address, ``--allowed-hosts``), which a
DNS-rebinding page cannot forge. Either way, an admin request (routes tagged ``admin``, the only
ones that change anything) that a browser sends from a page of another origin than
``--cors-origins`` is refused. ``api.guards`` caps bodies and streams.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Security
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.telemetry import TelemetryConfig
from starlette.types import ASGIApp, Receive, Scope, Send

from weir import __version__
from weir.api import errors, fastpath, guards, metrics, streamtoken
from weir.api.forward import LeaderForward
from weir.api.registry import Registry
from weir.api.remote import RemoteRuntime
from weir.api.routes import admin, auth, broadcast, dashboard, docs, jobs, sql, state, top, windows
from weir.api.settings import ApiSettings
from weir.api.streamtoken import StreamKeys

OPEN_PATHS = guards.OPEN_PATHS
# Pages that hold no data, which a browser navigates to and so cannot send a header to: the
# dashboard (its requests carry the token typed into it) and the OpenAPI description with /docs
# (whose Authorize button then sends the token), and the scripts and styles those pages load
# (weir serves them itself: routes/docs.py). With a token they are served to anyone.
TOKEN_FREE_PATHS = (
    OPEN_PATHS
    | {"/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    | docs.ASSET_PATHS
)

# Declares the scheme in OpenAPI (so /docs has Authorize and generated clients send the token);
# it refuses nothing itself: RequireToken, in front of every route, is what enforces the token.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="WEIR_API_TOKEN: needed on every route but /health when the API runs with one",
)


def _operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operation id is its function's name (``get_state``, ``list_keys``):
    stable, snake_case, one per route, for generated clients."""
    return route.name


NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


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
        generate_unique_id_function=_operation_id,
        docs_url=None,  # routes/docs.py serves /docs and /redoc with their assets, no CDN
        redoc_url=None,
        # weir's own series are /metrics; FastAPI's OpenTelemetry hooks asked the global
        # providers on every request (3 us of a 100 us lookup) for spans nobody configured
        telemetry=NO_TELEMETRY,
    )
    app.state.registry = registry
    app.state.stream_keys = StreamKeys.from_api_token(settings.token) if settings.token else None
    # innermost, so the guards, the token and the metrics see its requests as any other
    app.add_middleware(
        fastpath.PointLookup, route=_point_route(), stream=_stream_route(), registry=registry
    )
    follows = _follows_leader(registry)
    if follows is not None:  # weir api: the leader may be on another host
        app.add_middleware(LeaderForward, target=follows)
    observe = metrics.install(app, registry).observe
    errors.install(app, observe=observe)
    app.state.direct = _direct(registry, settings, observe, follows)
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
    protected = [Security(BEARER)]
    app.include_router(jobs.health_router)
    app.include_router(jobs.router, dependencies=protected)
    app.include_router(admin.router, dependencies=protected)
    app.include_router(auth.router, dependencies=protected)
    app.include_router(dashboard.router)
    app.include_router(docs.router)
    app.include_router(top.router, dependencies=protected)
    app.include_router(windows.router, dependencies=protected)
    app.include_router(broadcast.router, dependencies=protected)
    app.include_router(sql.router, dependencies=protected)
    # last: its path pattern is the most general
    app.include_router(state.router, dependencies=protected)
    app.add_middleware(GuardAdmin, routes=admin_routes(), origins=frozenset(settings.cors_origins))
    _guard(app, settings)
    return app


def _follows_leader(registry: Registry) -> Callable[[], str | None] | None:
    """Where the leader of a job served apart (``weir api``) answers when its state is on
    another host (None: this API serves no such job)."""
    remote = [h.runtime for h in registry.jobs.values() if isinstance(h.runtime, RemoteRuntime)]
    if not remote:
        return None

    def target() -> str | None:
        return next((url for r in remote if (url := r.forward_to) is not None), None)

    return target


def _guard(app: FastAPI, settings: ApiSettings) -> None:
    """The guards of ``api.guards``, added innermost first (the last one added runs first)."""
    app.add_middleware(guards.StreamCap, pattern=_stream_route(), limit=settings.max_streams)
    app.add_middleware(guards.BodyCap, limit=settings.max_body_bytes)
    if not settings.guarded:
        app.add_middleware(guards.HealthOnly, host=settings.host)
    if settings.checks_host:
        names = guards.allowed_hosts(settings.host, settings.allowed_hosts)
        app.add_middleware(guards.AllowedHosts, names=names)


def _direct(
    registry: Registry,
    settings: ApiSettings,
    observe: errors.Observer,
    follows: Callable[[], str | None] | None,
) -> fastpath.DirectAnswer | None:
    """The point lookups the HTTP protocol answers itself (``api.fastpath.DirectAnswer``):
    none where the API serves only ``/health``; none while ``follows`` names a leader on
    another host to forward to."""
    if not settings.guarded:
        return None
    names = guards.allowed_hosts(settings.host, settings.allowed_hosts)
    return fastpath.DirectAnswer(
        _point_route(),
        _stream_route(),
        registry,
        observe,
        token=settings.token,
        hosts=guards.HostNames(names) if settings.checks_host else None,
        cors=bool(settings.cors_origins),
        follows=follows,
    )


def _point_route() -> APIRoute:
    found = [
        r for r in state.router.routes if isinstance(r, APIRoute) and r.endpoint is state.get_state
    ]
    return found[0]


def _stream_route() -> re.Pattern[str]:
    found = [
        r.path_regex
        for r in state.router.routes
        if isinstance(r, APIRoute) and r.endpoint is state.stream_state
    ]
    return found[0]


def admin_routes() -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """The admin router's routes (included without a prefix): path patterns and methods."""
    return [
        (r.path_regex, frozenset(r.methods or ()))
        for r in admin.router.routes
        if isinstance(r, APIRoute)
    ]


def _require_token(app: FastAPI, token: str) -> None:
    app.add_middleware(
        RequireToken,
        expected=f"Bearer {token}".encode(),
        streams=_stream_route(),
        keys=StreamKeys.from_api_token(token),
        admin=admin_routes(),
    )


class RequireToken:
    """Every route but ``TOKEN_FREE_PATHS`` (and CORS preflights) needs the bearer token; the event
    streams (``streams``) take a stream token (``api.streamtoken``) as ``?access_token=``
    instead. The stream token is taken out of the query string first, so nothing after this
    (routes, logs, uvicorn's access log, which reads this same scope) sees it. A read token
    (the dashboard's) opens ``GET``/``HEAD`` of every route but the admin ones."""

    def __init__(
        self,
        app: ASGIApp,
        expected: bytes,
        streams: re.Pattern[str],
        keys: StreamKeys,
        admin: list[tuple[re.Pattern[str], frozenset[str]]],
    ) -> None:
        self.app = app
        self.expected = expected
        self.streams = streams
        self.keys = keys
        self.admin = admin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if scope["type"] != "http" or path in TOKEN_FREE_PATHS or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        access, scope["query_string"] = streamtoken.take(scope.get("query_string", b""))
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        if streamtoken.is_read_token(given) and self._readable(scope):
            try:
                self.keys.check(given[len(b"Bearer ") :].decode("latin-1"), path, reads=True)
            except streamtoken.Refused as refused:
                await _unauthorized(refused.code, refused.message)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if access is not None and self.streams.match(scope["path"]):
            try:
                self.keys.check(access, scope["path"])
            except streamtoken.Refused as refused:
                await _unauthorized(refused.code, refused.message)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        message = (
            "this API needs 'Authorization: Bearer <token>' "
            "(the token weir was started with, WEIR_API_TOKEN)"
        )
        if access is not None:
            message += "; access_token opens the /stream routes only"
        await _unauthorized("unauthorized", message)(scope, receive, send)

    def _readable(self, scope: Scope) -> bool:
        """A read: ``GET``/``HEAD`` of a route that is not an admin route."""
        method = scope["method"]
        return method in ("GET", "HEAD") and not any(
            method in methods and pattern.match(scope["path"]) for pattern, methods in self.admin
        )


def _unauthorized(code: str, message: str) -> ASGIApp:
    return errors.error_response(401, code, message, headers={"WWW-Authenticate": "Bearer"})


class GuardAdmin:
    """Refuses admin requests (403, JSON) that carry an ``Origin`` header that ``origins`` does
    not hold. (Without a token, an API off loopback refuses them with everything else:
    ``guards.HealthOnly``.)"""

    def __init__(
        self,
        app: ASGIApp,
        routes: list[tuple[re.Pattern[str], frozenset[str]]],
        origins: frozenset[str],
    ) -> None:
        self.app = app
        self.routes = routes
        self.origins = origins
        self.methods = frozenset().union(*(methods for _, methods in routes))

    def _is_admin(self, scope: Scope) -> bool:
        if scope["method"] not in self.methods:  # a read: no pattern to match
            return False
        return any(
            scope["method"] in methods and pattern.match(scope["path"])
            for pattern, methods in self.routes
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._is_admin(scope):
            await self.app(scope, receive, send)
            return
        origin = dict(scope["headers"]).get(b"origin")
        if origin is None or origin.decode("latin-1") in self.origins:
            await self.app(scope, receive, send)
            return
        message = (
            f"{scope['method']} {scope['path']} changes the job and was sent by a page of origin "
            f"{origin.decode('latin-1')!r}; only --cors-origins may send admin requests"
        )
        response = errors.error_response(403, "cross_origin_refused", message)
        await response(scope, receive, send)
