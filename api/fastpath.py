"""The point lookup's hot path, without FastAPI's per-request machinery.

``GET /{job}/{op}/state/{key}`` is the route clients call in a loop. Through FastAPI each call
walks the included routers, builds a ``Request``, solves the route's dependencies and validates
its query with pydantic before ``key_answer`` runs; that costs more than the lookup. ``PointLookup``
sits inside the guards and the metrics (so access rules, limits and ``weir_http_*`` series are
the same) and answers the common case itself: a ``GET`` whose query holds only ``limit``,
``from``, ``to`` and ``consistency=live``, each in a form whose value is beyond doubt. Every
other request, a bounded or committed read, a value FastAPI would refuse or read differently,
a repeated parameter, goes on to the FastAPI route, which stays the one documented in OpenAPI.
Both paths build the answer with the same functions (``key_answer``, ``json_answer``,
``api_error_response``), so the JSON, the headers and the errors are the same.

``DirectAnswer`` goes one step further down (decision 0027): the HTTP protocol
(``app.http_guard``) asks it for a kept-alive ``GET`` before any ASGI is made, and writes what
it answers as one buffer. It answers only a found key, and only where the middleware above
``PointLookup`` would pass the request on unchanged; everything else, refusals and errors
included, takes the ASGI path, which answers it as before.
"""

from __future__ import annotations

import functools
import hmac
import re
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

import anyio
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from weir.api.deps import job_handle, operator
from weir.api.errors import ApiError, Observer, api_error_response, state_error_response
from weir.api.guards import HostNames
from weir.api.registry import Registry
from weir.api.routes.state import MAX_LIMIT, Bounds, answer_as_of, json_answer, key_answer
from weir.base.errors import StateError

# forms whose value pydantic and int() read alike; anything else is FastAPI's to judge
_COUNT = re.compile(r"[0-9]{1,5}")
_TIME = re.compile(r"-?[0-9]{1,18}")
# the freshness bound waits, on the route's own path
_BOUNDED = frozenset({"min_watermark", "min_checkpoint", "timeout_ms"})


@functools.lru_cache(maxsize=256)  # a client in a loop sends the same few query strings
def simple_bounds(query: bytes) -> Bounds | None:
    """The bounds of a query string the fast path answers as the route would, else ``None``.
    Parsed as Starlette parses it (latin-1, blank values kept); unknown names are ignored, as
    the route ignores them. ``Bounds`` is frozen, so one answer serves every request that
    sends the same string."""
    if not query:
        return Bounds()
    given: dict[str, str] = {}
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name in given or name in _BOUNDED:
            return None
        given[name] = value
    limit, from_, to = given.get("limit"), given.get("from"), given.get("to")
    if given.get("consistency", "live") != "live":
        return None
    if limit is not None and not (_COUNT.fullmatch(limit) and 1 <= int(limit) <= MAX_LIMIT):
        return None
    if any(t is not None and not _TIME.fullmatch(t) for t in (from_, to)):
        return None
    return Bounds(
        None if from_ is None else int(from_),
        None if to is None else int(to),
        1000 if limit is None else int(limit),
    )


def _if_none_match(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"if-none-match":
            return bytes(value).decode("latin-1")
    return ""


def point_target(
    route: APIRoute, stream: re.Pattern[str], path: str, query: bytes
) -> tuple[str, str, str, Bounds] | None:
    """The job, operator, key and bounds of a point lookup the fast paths answer, else
    ``None`` (another route, an event stream, a query for the FastAPI route)."""
    found = route.path_regex.match(path) if "/state/" in path else None
    if found is None or stream.match(path):
        return None
    bounds = simple_bounds(query)
    if bounds is None:
        return None
    job, op, key = found.group("job", "op", "key")
    return job, op, key, bounds


class PointLookup:
    """Pure ASGI, innermost of the app's middleware: answers the point lookups it can (see the
    module), hands everything else to ``app``."""

    def __init__(
        self, app: ASGIApp, route: APIRoute, stream: re.Pattern[str], registry: Registry
    ) -> None:
        self.app = app
        self.route = route
        self.stream = stream
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        target = point_target(self.route, self.stream, scope["path"], scope["query_string"])
        if target is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route  # as the router would set it: the metrics' route label
        job, op, key, bounds = target
        try:
            handle = job_handle(self.registry, job)
            op_def = operator(handle, op)
            bounds.check()
            if handle.remote:  # a cluster task answers over the network: off the loop
                body = await anyio.to_thread.run_sync(key_answer, handle, op_def, key, bounds)
            else:
                body = key_answer(handle, op_def, key, bounds)
            response = json_answer(body, _if_none_match(scope), as_of=answer_as_of(handle, body))
        except ApiError as exc:
            response = api_error_response(exc)
        except StateError as exc:
            response = state_error_response(exc)
        await response(scope, receive, send)


# what a direct answer is: status, headers (lower-case names, as ASGI sends them), body
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
# the request headers a direct answer reads; each may be sent once at most
_READ = frozenset({b"host", b"authorization", b"if-none-match", b"origin"})


class DirectAnswer:
    """A found key's point lookup, answered for the HTTP protocol itself (``app.http_guard``
    calls it with a kept-alive ``GET``'s path, query and headers, before any ASGI scope, task
    or middleware is made), or ``None``: the request then takes the ASGI path as any other.

    It answers only where the middleware would pass the request on unchanged, checked in the
    same terms: a ``Host`` that names this server (``AllowedHosts``'s ``HostNames``), the API's
    token exactly as ``RequireToken`` compares it (a read token, a stream token or none is
    ``RequireToken``'s to judge), no ``Origin`` where CORS is on, none of these headers sent
    twice, no ``access_token`` in the query, no leader on another host to forward to (``follows``:
    ``LeaderForward``'s target). ``create_app`` makes none where ``HealthOnly`` is in the stack.
    A refusal, a 404, a state error or an exception is not
    answered here either: the ASGI path answers it again, with its error body and its log. The
    request is counted in ``weir_http_*`` as ``CatchAll`` counts it (``observe``)."""

    def __init__(
        self,
        route: APIRoute,
        stream: re.Pattern[str],
        registry: Registry,
        observe: Observer,
        *,
        token: str | None,
        hosts: HostNames | None,
        cors: bool,
        follows: Callable[[], str | None] | None = None,
    ) -> None:
        self.route = route
        self.stream = stream
        self.registry = registry
        self.observe = observe
        self.token = f"Bearer {token}".encode() if token else None
        self.hosts = hosts
        self.cors = cors
        self.follows = follows

    def __call__(
        self, path: str, query: bytes, headers: list[tuple[bytes, bytes]]
    ) -> Answer | None:
        t0 = time.perf_counter()
        given = self._admitted(headers)
        if given is None or b"access_token" in query:
            return None
        if self.follows is not None and self.follows() is not None:
            return None  # LeaderForward's to forward
        target = point_target(self.route, self.stream, path, query)
        if target is None:
            return None
        job, op, key, bounds = target
        try:
            handle = job_handle(self.registry, job)
            if handle.remote:  # read over the network: not on the protocol's callback
                return None
            op_def = operator(handle, op)
            bounds.check()
            body = key_answer(handle, op_def, key, bounds)
            as_of = answer_as_of(handle, body)
            response = json_answer(
                body, given.get(b"if-none-match", b"").decode("latin-1"), as_of=as_of
            )
        except Exception:  # noqa: BLE001 - answered (and logged, if it is news) by the ASGI path
            return None
        status = response.status_code
        self.observe("GET", self.route.path, status, time.perf_counter() - t0)
        return status, response.raw_headers, bytes(response.body)

    def _admitted(self, headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes] | None:
        """The headers read, if the middleware would pass the request on unchanged."""
        given: dict[bytes, bytes] = {}
        for name, value in headers:
            if name in _READ:
                if name in given:
                    return None
                given[name] = value
        if self.cors and b"origin" in given:
            return None
        host = given.get(b"host")
        if self.hosts is not None and host is not None and not self.hosts.allows(host):
            return None
        if self.token is not None and not hmac.compare_digest(
            given.get(b"authorization", b""), self.token
        ):
            return None
        return given
