"""``GET /{job}/{op}/state/{key}``: a key's windows, read from the owning worker's RocksDB."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field

from weir.api import cellkeys, keylist
from weir.api.deps import (
    Consistency,
    Freshness,
    api_metrics,
    freshness,
    job_handle,
    operator,
    public_watermark,
    registry,
    wait_fresh,
)
from weir.api.errors import ApiError, ErrorBody, error_body, not_found
from weir.api.hints import no_state
from weir.api.metrics import ApiMetrics
from weir.api.models import KeyList, LookupAnswer, NotFreshEnough, StateAnswer
from weir.api.registry import JobHandle, Registry
from weir.api.statesource import StateSource
from weir.base.errors import StateError
from weir.base.jsonenc import dumps_json
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.runtime.stored import (
    decode_session,
    decode_state,
    query_windows,
    stores_cells,
    uses_panes,
)
from weir.engine.windows import is_late
from weir.state import layout
from weir.state.keygroups import key_group, key_value

router = APIRouter(tags=["state"])

MAX_LIMIT = 10_000
MAX_LOOKUP_KEYS = 1_000
MAX_KEYS_PAGE = 1_000
RETRY_MS = 2_000  # how long an EventSource waits before it reconnects
ERROR_BODY_REF = {"$ref": "#/components/schemas/ErrorBody"}
NOT_FRESH: dict[int | str, dict[str, Any]] = {
    409: {"model": NotFreshEnough, "description": "the freshness bound was not met in time"}
}


@dataclass(frozen=True, slots=True)
class Bounds:
    """Which windows an answer holds: starts within ``[from_, to]``, the newest ``limit``."""

    from_: int | None = None
    to: int | None = None
    limit: int = 1000

    def check(self) -> None:
        if self.from_ is not None and self.to is not None and self.to < self.from_:
            raise ApiError(
                400, "invalid_range", f"to={self.to} is before from={self.from_}; swap them"
            )


def key_answer(
    handle: JobHandle,
    op_def: WindowNode | ProcessNode,
    key: str,
    bounds: Bounds,
    consistency: str = "live",
) -> dict[str, Any]:
    """One key's state in one operator, as ``GET /{job}/{op}/state/{key}`` answers it; raises
    a 404 ``ApiError`` when the key has none."""
    job, op = handle.job.name, op_def.name
    raw_key = key.encode()
    if len(raw_key) > layout.MAX_KEY_BYTES:
        raise ApiError(400, "key_too_long", f"key of {len(raw_key)} bytes exceeds the limit")
    kg = key_group(key, handle.job.max_parallelism)
    source = StateSource(handle, consistency)
    wm, checkpoint = source.as_of(op)
    # without `to`, the answer is the key's newest `limit` windows: read from just below them
    newest = None if bounds.to is not None else cellkeys.Newest(bounds.limit, wm)
    rows, stored = cellkeys.read_key(source.ranges, source.scan, kg, op_def, raw_key, newest)
    if not rows and not (stored and (stored[0] or stored[1])):
        raise not_found("key_not_found", no_state(handle, op_def, key, kg))
    answer: dict[str, Any] = {
        "job": job,
        "op": op,
        "key": key_value(key),  # the path holds the canonical form: \N is the NULL key
        "key_group": kg,
        "watermark": public_watermark(wm),
        "checkpoint": checkpoint,
        "consistency": consistency,
    }
    if isinstance(op_def, ProcessNode):
        answer.update(windows=[], state=dict(decode_state(value)[0::2] for _, value in rows))
        return answer
    plan = handle.plan(op_def)
    lateness = op_def.allowed_lateness_ms
    windows: list[dict[str, Any]] = []
    if op_def.triggered:  # count/global windows, triggers, evictors: their own stored form
        entries = query_windows(op_def, plan, rows, wm)
    elif stored is not None:
        entries = [
            (s, e, a, is_late(e, lateness, wm))
            for s, e, a in cellkeys.composed(op_def, plan.merge, *stored)
        ]
    else:
        entries = [(s, e, a, is_late(e, lateness, wm)) for s, e, a in _sessions(rows)]
    for start, end, slots, final in entries:
        if (bounds.from_ is not None and start < bounds.from_) or (
            bounds.to is not None and start > bounds.to
        ):
            continue
        window = plan.result("", start, end, slots, final)
        del window["key"]
        windows.append(window)
    answer["windows"] = windows[-bounds.limit :]
    return answer


def etag_of(raw: bytes) -> str:
    """An answer's ETag (without its quotes), and its event id in a stream."""
    return hashlib.blake2b(raw, digest_size=12).hexdigest()


def json_response(
    body: Any, request: Request, status: int = 200, as_of: float | None = None
) -> Response:
    """``json_answer`` for a FastAPI route's request."""
    return json_answer(body, request.headers.get("if-none-match", ""), status, as_of)


def json_answer(
    body: Any, if_none_match: str, status: int = 200, as_of: float | None = None
) -> Response:
    """Serialized here (DESIGN's field order, no re-validation), with an ``ETag``: a poll whose
    ``If-None-Match`` names the current answer gets an empty 304. ``as_of`` (wall time the
    state was read as of) goes in ``X-Weir-As-Of`` (epoch ms) and ``Age``, outside the ETag."""
    raw = dumps_json(body)  # ints past 64 bits (exact sums) too
    etag = f'"{etag_of(raw)}"'
    headers = [(b"etag", etag.encode())]
    if as_of:
        headers.append((b"x-weir-as-of", b"%d" % int(as_of * 1000)))
        headers.append((b"age", b"%d" % max(0, int(time.time() - as_of))))
    if etag in if_none_match:
        return JsonAnswer(b"", 304, headers)
    headers.append((b"content-length", b"%d" % len(raw)))
    headers.append((b"content-type", b"application/json"))
    return JsonAnswer(raw, status, headers)


class JsonAnswer(Response):
    """A ``Response`` given its headers as bytes: Starlette's own builds them from a mapping
    on every answer (2 us of a point lookup). The same headers as ``Response(raw,
    media_type="application/json", headers=...)``, in the same order (a 304 has neither a
    length nor a type)."""

    def __init__(self, raw: bytes, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status_code = status
        self.body = raw
        self.background = None
        self.raw_headers = headers


def answer_as_of(handle: JobHandle, body: dict[str, Any]) -> float | None:
    """When the state behind a key answer was read: the owning reader's last catch-up with
    its worker (live), or the checkpoint's time (committed)."""
    if body.get("consistency") == "committed":
        time_ms = handle.committed.time_of(body["checkpoint"]) if handle.committed else None
        return time_ms / 1000 if time_ms else None
    return handle.reader_for(int(body["key_group"])).caught_up_at or None


@router.get(
    "/{job}/{op}/state",
    operation_id="list_keys",
    response_model=KeyList,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, **NOT_FRESH},
)
async def list_keys(
    job: str,
    op: str,
    reg: Annotated[Registry, Depends(registry)],
    metrics: Annotated[ApiMetrics, Depends(api_metrics)],
    fresh: Annotated[Freshness, Depends(freshness)],
    prefix: Annotated[str, Query(description="only keys starting with this")] = "",
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_KEYS_PAGE)] = 100,
) -> dict[str, Any]:
    """The keys an operator holds state for, in a stable order (key group, then the state
    layout's order), a page at a time; every key appears once across the pages. A page examines
    at most about ``keylist.SCAN_BUDGET`` positions, so a rare prefix may give pages with fewer
    keys than ``limit`` (even none) and a ``next_cursor``: the listing is over when that is
    null."""
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
    m = handle.job.max_parallelism
    want = prefix.encode()
    if len(want) > layout.MAX_KEY_BYTES:
        raise ApiError(
            400, "prefix_too_long", f"prefix of {len(want)} bytes is longer than any key"
        )
    start = listing_position(op_def, cursor, m)
    await wait_fresh(fresh, handle, op)
    page = await anyio.to_thread.run_sync(key_page, handle, op_def, want, start, limit)
    metrics.keys_examined.inc(page.examined)
    cursor_out = page.next.encode() if page.next is not None else None
    return {"job": job, "op": op, "keys": page.keys, "next_cursor": cursor_out}


def listing_position(
    op: WindowNode | ProcessNode, cursor: str | None, max_parallelism: int
) -> keylist.Position | cellkeys.CellPosition | None:
    """Where a listing resumes (``cursor``: a page's ``next_cursor``), or a 400."""
    cells = isinstance(op, WindowNode) and stores_cells(op)
    try:
        kind = cellkeys.CellPosition if cells else keylist.Position
        return kind.decode(cursor, max_parallelism) if cursor else None
    except keylist.BadCursor as exc:
        raise ApiError(400, "invalid_cursor", f"cursor {(cursor or '')[:40]!r} is not one this "
                       f"API gave out ({exc}); pass the next_cursor of the previous page, or "
                       "start again without a cursor") from None  # fmt: skip


def key_page(
    handle: JobHandle,
    op: WindowNode | ProcessNode,
    want: bytes,
    start: keylist.Position | cellkeys.CellPosition | None,
    limit: int,
    consistency: str = "live",
) -> keylist.Page:
    """A page of the key listing (live, or the checkpoint's): by cell bucket, or by seeking."""
    ids = [op.state_id]
    if isinstance(op, WindowNode) and uses_panes(op.assigner):
        ids.append(op.pane_state_id)
    source = StateSource(handle, consistency)
    m = handle.job.max_parallelism
    if isinstance(op, WindowNode) and stores_cells(op) and not isinstance(start, keylist.Position):
        found = cellkeys.list_keys(
            source.between, ids, m, want, start or cellkeys.CellPosition(0, 0, None), limit
        )
        keys = [k.decode(errors="replace") for _, k, _ in found.found]
        return keylist.Page(keys, found.next, found.examined)
    begin = start if isinstance(start, keylist.Position) else keylist.Position(0, None)
    return keylist.list_keys(source.iterator, ids, m, want, begin, limit)


@dataclass(frozen=True, slots=True)
class StreamTarget:
    handle: JobHandle
    op: WindowNode | ProcessNode


async def stream_target(
    job: str, op: str, reg: Annotated[Registry, Depends(registry)]
) -> StreamTarget:
    """Resolved before a stream starts, so an unknown job or operator is a 404, not an event."""
    handle = job_handle(reg, job)
    return StreamTarget(handle, operator(handle, op))


async def _stream_answer(target: StreamTarget, key: str, bounds: Bounds) -> tuple[str, bytes]:
    """The event to send, ``("message", answer)``, or ``("error", error body)`` while the key
    has no answer: a typed ``event: error`` frame, which an ``EventSource`` hands to its
    ``error`` listeners and a client tells apart without looking into the data."""
    try:
        answer = await anyio.to_thread.run_sync(key_answer, target.handle, target.op, key, bounds)
        return "message", dumps_json(answer)
    except ApiError as exc:  # not there (yet): said once, and the stream keeps watching
        return "error", dumps_json(error_body(exc.code, exc.message))
    except StateError as exc:  # the worker is still creating its state
        return "error", dumps_json(error_body("state_unavailable", str(exc)))


@router.get(
    "/{job}/{op}/state/{key:path}/stream",
    operation_id="stream_state",
    response_class=EventSourceResponse,
    # a model here would be documented as the stream's media type; the 404 is JSON
    responses={404: {"content": {"application/json": {"schema": ERROR_BODY_REF}}}},
)
async def stream_state(
    key: str,
    target: Annotated[StreamTarget, Depends(stream_target)],
    metrics: Annotated[ApiMetrics, Depends(api_metrics)],
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 10,
    interval_ms: Annotated[int, Query(ge=50, le=60_000)] = 250,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="the id of the last event seen")
    ] = None,
) -> AsyncIterator[ServerSentEvent]:
    """Server-Sent Events: the key's answer (as the point lookup gives it) each time it
    changes, checked every ``interval_ms``. An event's ``id`` is the answer's ETag, so a client
    that reconnects with ``Last-Event-ID`` gets the next event only once the answer differs from
    the one it has. While the key has no answer (``key_not_found``, state not there yet) the
    event is ``event: error`` with the JSON error body as its data, and the stream keeps
    watching. The first event of a connection carries ``retry``; a comment follows 15 s
    without an event, which keeps proxies open. (A key that itself ends in ``/stream`` is read
    with the point lookup.)"""
    bounds = Bounds(limit=limit)
    sent = last_event_id
    retry: int | None = RETRY_MS
    metrics.open_streams.inc()
    try:  # when the client goes, FastAPI cancels this generator wherever it waits
        while True:
            kind, raw = await _stream_answer(target, key, bounds)
            tag = etag_of(raw)
            if tag != sent:
                sent = tag
                event = None if kind == "message" else kind  # no event field: a message
                yield ServerSentEvent(raw_data=raw.decode(), event=event, id=tag, retry=retry)
                retry = None
            elif retry is not None:  # a resumed stream whose answer has not changed
                yield ServerSentEvent(comment=f"no change since event {tag}", retry=retry)
                retry = None
            await anyio.sleep(interval_ms / 1000)
    finally:
        metrics.open_streams.dec()


@router.get(
    "/{job}/{op}/state/{key:path}",
    operation_id="get_state",
    response_model=StateAnswer,
    responses={
        304: {"description": "unchanged since the ETag in If-None-Match"},
        404: {"model": ErrorBody},
        400: {"model": ErrorBody},
        **NOT_FRESH,
        422: {"model": ErrorBody},
    },
)
async def get_state(
    job: str,
    op: str,
    key: str,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    fresh: Annotated[Freshness, Depends(freshness)],
    from_: Annotated[
        int | None, Query(alias="from", description="earliest window start, ms")
    ] = None,
    to: Annotated[int | None, Query(description="latest window start (inclusive), ms")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="most recent N windows")] = 1000,
    consistency: Consistency = "live",
) -> Response:
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
    bounds = Bounds(from_, to, limit)
    bounds.check()
    await wait_fresh(fresh, handle, op, consistency)
    if consistency == "committed" or handle.remote:  # may open a view, or ask a task
        body = await anyio.to_thread.run_sync(key_answer, handle, op_def, key, bounds, consistency)
    else:
        body = key_answer(handle, op_def, key, bounds, consistency)
    return json_response(body, request, as_of=answer_as_of(handle, body))


class LookupRequest(BaseModel):
    keys: list[str] = Field(min_length=1, max_length=MAX_LOOKUP_KEYS)
    from_: int | None = Field(default=None, alias="from")
    to: int | None = None
    limit: int = Field(default=1000, ge=1, le=MAX_LIMIT)
    consistency: Consistency = "live"


@router.post(
    "/{job}/{op}/lookup",
    operation_id="lookup",
    response_model=LookupAnswer,
    responses={
        404: {"model": ErrorBody},
        400: {"model": ErrorBody},
        **NOT_FRESH,
        422: {"model": ErrorBody},
    },
)
async def lookup(
    job: str,
    op: str,
    body: LookupRequest,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    fresh: Annotated[Freshness, Depends(freshness)],
) -> Response:
    """Many keys in one call: ``{"results": [<point answer> | {"key", "error"}]}``, in the order
    asked, each equal to what ``GET /{job}/{op}/state/{key}`` answers for that key. The
    freshness bound (query parameters) holds for the whole batch."""
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
    bounds = Bounds(body.from_, body.to, body.limit)
    bounds.check()
    await wait_fresh(fresh, handle, op, body.consistency)
    results = await anyio.to_thread.run_sync(_lookup, handle, op_def, body, bounds)
    return json_response({"job": job, "op": op, "results": results}, request)


def _lookup(
    handle: JobHandle, op: WindowNode | ProcessNode, body: LookupRequest, bounds: Bounds
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for key in body.keys:
        try:
            results.append(key_answer(handle, op, key, bounds, body.consistency))
        except ApiError as exc:
            results.append({"key": key, **error_body(exc.code, exc.message)})
    return results


def _sessions(rows: list[tuple[bytes, bytes]]) -> list[tuple[int, int, list[Any]]]:
    """A key's sessions as ``(start, end, slots)``: a session stores its start."""
    out = []
    for k, v in rows:
        start, slots = decode_session(v)
        out.append((start, layout.decode_namespace(k[-layout.NAMESPACE_BYTES :]), slots))
    return out
