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
"""

from __future__ import annotations

import functools
import re
from urllib.parse import parse_qsl

import anyio
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from weir.api.deps import job_handle, operator
from weir.api.errors import ApiError, api_error_response, state_error_response
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
        path = scope["path"]
        found = self.route.path_regex.match(path) if "/state/" in path else None
        if found is None or self.stream.match(path):
            await self.app(scope, receive, send)
            return
        bounds = simple_bounds(scope["query_string"])
        if bounds is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route  # as the router would set it: the metrics' route label
        job, op, key = found.group("job", "op", "key")
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
