"""``GET /{job}/{op}/windows/{start}``: every key that has a window starting at ``start``, in
the order of the keys' strings, a page at a time.

Keys are stored by key group, then length, then bytes (``state.layout``), so the listing merges
one ordered stream per key group and key length (``keylist.list_in_key_order``) and asks each
key for its one window with a point read (a window end is the key's namespace). A page costs
about two seeks per (key group, key length) present plus two per key it examines; it stops
after ``keylist.SCAN_BUDGET`` positions with a ``next_cursor``, so a rare window gives short
(even empty) pages, never an unbounded one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response

from weir.api import keylist
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
from weir.api.errors import ApiError, ErrorBody
from weir.api.metrics import ApiMetrics
from weir.api.models import WindowKeys
from weir.api.registry import JobHandle, Registry
from weir.api.routes.state import NOT_FRESH, StateSource, json_response
from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored import compose_stored, decode_window, uses_panes
from weir.engine.windows import MAX_TIME, MIN_TIME, SlidingWindows, TumblingWindows, is_late
from weir.state import layout
from weir.state.keygroups import key_group_of_stored

router = APIRouter(tags=["state"])

MAX_PAGE = 1_000


@dataclass(frozen=True, slots=True)
class _Grid:
    """A tumbling or sliding operator's windows: ``size`` long, one starting every ``step``
    from ``offset``."""

    op: WindowNode
    size: int
    step: int
    offset: int = 0

    def end_of(self, start: int) -> int:
        """The end of the window that starts at ``start``; a 400 when none starts there."""
        if (start - self.offset) % self.step or not MIN_TIME <= start <= MAX_TIME:
            below = start - (start - self.offset) % self.step
            raise ApiError(
                400,
                "invalid_window_start",
                f"no window of operator {self.op.name!r} starts at {start}: starts are "
                f"multiples of {self.step} ms (offset {self.offset} ms) within the 64-bit range; "
                f"use {below} or {below + self.step}",
            )
        end = start + self.size
        return end if end < MAX_TIME else MAX_TIME


def grid_of(handle: JobHandle, op: str) -> _Grid:
    """The windows of tumbling or sliding operator ``op``; a 400 for any other operator."""
    found = operator(handle, op)
    if isinstance(found, WindowNode) and not found.triggered:
        assigner = found.assigner
        if isinstance(assigner, SlidingWindows):
            return _Grid(found, assigner.size_ms, assigner.slide_ms, assigner.offset_ms)
        if isinstance(assigner, TumblingWindows):
            return _Grid(found, assigner.size_ms, assigner.size_ms, assigner.offset_ms)
    kind = "no windows"
    if isinstance(found, WindowNode):  # triggered windows keep their own stored form
        kind = "triggered " if found.triggered else ""
        kind += f"{found.assigner.describe()['type']} windows"
    raise ApiError(
        400,
        "not_supported",
        f"operator {op!r} of job {handle.job.name!r} has {kind}: its windows have no fixed "
        "starts to list keys by; read a key's windows with GET /{job}/{op}/state/{key}",
    )


class _WindowReader:
    """One key's window ``[start, end)`` of a tumbling or sliding operator, as stored: a
    window row, or (an open sliding window) composed from the panes it holds."""

    def __init__(self, handle: JobHandle, op: WindowNode, source: StateSource, end: int):
        self.op = op
        self.source = source
        self.end = end
        self.plan = handle.plan(op)
        self.panes = isinstance(op.assigner, SlidingWindows) and uses_panes(op.assigner)

    def slots(self, kg: int, key: bytes) -> list[Any] | None:
        lo = layout.state_key(kg, self.op.state_id, key, self.end)
        rows = self.source.between(kg, lo, layout.prefix_upper_bound(lo))
        if rows:
            return decode_window(rows[0][1])
        assigner = self.op.assigner
        if not self.panes or not isinstance(assigner, SlidingWindows):
            return None
        sid = self.op.pane_state_id
        first = layout.state_key(kg, sid, key, assigner.panes_of(self.end)[0])
        last = layout.state_key(kg, sid, key, self.end)
        rows = self.source.between(kg, first, layout.prefix_upper_bound(last))
        if not rows:
            return None
        panes = {layout.decode_state_key(k)[3]: decode_window(v) for k, v in rows}
        return compose_stored(assigner, self.plan.merge, {}, panes).get(self.end)


def _cursor(cursor: str | None, m: int) -> bytes | None:
    """The key a page starts after; a 400 for a cursor this route did not give out."""
    if cursor is None:
        return None
    try:
        at = keylist.Position.decode(cursor, m)
        if at.key is None or key_group_of_stored(at.key, m) != at.key_group:
            raise keylist.BadCursor("it names no key of a window listing")
    except keylist.BadCursor as exc:
        raise ApiError(
            400,
            "invalid_cursor",
            f"cursor {cursor[:40]!r} is not one this API gave out ({exc}); pass the "
            "next_cursor of the previous page, or start again without a cursor",
        ) from None
    return at.key


def window_slots(
    handle: JobHandle, grid: _Grid, start: int, consistency: Consistency = "live"
) -> Iterator[tuple[list[str], list[list[Any]]]]:
    """Every key of window ``start`` with its accumulator slots, a page of keys at a time, in
    the listing's order (``/top``'s ranking of a retained window reads it whole)."""
    op, end = grid.op, grid.end_of(start)
    source = StateSource(handle, consistency)
    reader = _WindowReader(handle, op, source, end)
    ids = [op.state_id, op.pane_state_id] if reader.panes else [op.state_id]
    m = handle.job.max_parallelism
    after: bytes | None = None
    while True:
        page = keylist.list_in_key_order(source.iterator, ids, m, after, MAX_PAGE, reader.slots)
        if page.found:
            keys = [raw.decode(errors="replace") for _, raw, _ in page.found]
            yield keys, [slots for _, _, slots in page.found]
        if page.next is None:
            return
        after = page.next.key


def window_page(
    handle: JobHandle,
    grid: _Grid,
    start: int,
    after: bytes | None,
    limit: int,
    consistency: Consistency,
) -> tuple[dict[str, Any], int]:
    """One page of the answer, and the positions it examined."""
    op, end = grid.op, grid.end_of(start)
    source = StateSource(handle, consistency)
    reader = _WindowReader(handle, op, source, end)
    ids = [op.state_id, op.pane_state_id] if reader.panes else [op.state_id]
    m = handle.job.max_parallelism
    wm, checkpoint = source.as_of(op.name)
    page = keylist.list_in_key_order(source.iterator, ids, m, after, limit, reader.slots)
    final = is_late(end, op.allowed_lateness_ms, wm)
    keys = []
    for kg, raw, slots in page.found:
        key = raw.decode(errors="replace")
        result = reader.plan.result(key, start, end, slots, final)
        del result["start"], result["end"]
        keys.append({"key": key, "key_group": kg, **result})
    body = {
        "job": handle.job.name,
        "op": op.name,
        "start": start,
        "end": end,
        "watermark": public_watermark(wm),
        "checkpoint": checkpoint,
        "consistency": consistency,
        "keys": keys,
        "next_cursor": page.next.encode() if page.next is not None else None,
    }
    return body, page.examined


@router.get(
    "/{job}/{op}/windows/{start}",
    operation_id="window_keys",
    response_model=WindowKeys,
    responses={
        304: {"description": "unchanged since the ETag in If-None-Match"},
        400: {"model": ErrorBody},
        404: {"model": ErrorBody},
        **NOT_FRESH,
        422: {"model": ErrorBody},
    },
)
async def window_keys(
    job: str,
    op: str,
    start: int,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    metrics: Annotated[ApiMetrics, Depends(api_metrics)],
    fresh: Annotated[Freshness, Depends(freshness)],
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    consistency: Consistency = "live",
) -> Response:
    """Every key with a window starting at ``start`` (epoch ms), ordered by key, with that
    window's aggregates: ``{"job","op","start","end","watermark","checkpoint","consistency",
    "keys":[{"key","key_group",<aggregates>,"final"}],"next_cursor"}``. A page examines about
    ``keylist.SCAN_BUDGET`` positions at most, so it may hold fewer keys than ``limit`` and
    still a ``next_cursor``: the listing is over when that is null. Session windows have no
    fixed starts (400 ``not_supported``)."""
    handle = job_handle(reg, job)
    grid = grid_of(handle, op)
    grid.end_of(start)
    after = _cursor(cursor, handle.job.max_parallelism)
    await wait_fresh(fresh, handle, op, consistency)
    body, examined = await anyio.to_thread.run_sync(
        window_page, handle, grid, start, after, limit, consistency
    )
    metrics.keys_examined.inc(examined)
    return json_response(body, request)


__all__ = ["grid_of", "router", "window_page", "window_slots"]
