"""``GET /{job}/{op}/windows/{start}``: every key that has a window starting at ``start``, a
page at a time, in the order the window's cells keep them: key group, bucket, key bytes.

A window's rows are cells, one per (key group, bucket) (``state/cells.py``), so a page reads one
bucket's cells of that window (every generation, merged) at a time, and for an open sliding
window the panes it holds (``cellkeys.list_window``). It stops after about
``keylist.SCAN_BUDGET`` entries with a ``next_cursor``, so a rare window gives short (even
empty) pages, never an unbounded one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response

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
from weir.api.errors import ApiError, ErrorBody
from weir.api.metrics import ApiMetrics
from weir.api.models import WindowKeys
from weir.api.registry import JobHandle, Registry
from weir.api.routes.state import NOT_FRESH, json_response
from weir.api.statesource import StateSource
from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored import compose_stored, uses_panes
from weir.engine.windows import MAX_TIME, MIN_TIME, SlidingWindows, TumblingWindows, is_late

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
    """One bucket's rows of window ``[start, end)`` of a tumbling or sliding operator, as
    stored: window cells, or (an open sliding window) composed from the panes it holds."""

    def __init__(self, handle: JobHandle, op: WindowNode, end: int):
        self.op = op
        self.end = end
        self.plan = handle.plan(op)
        self.panes = isinstance(op.assigner, SlidingWindows) and uses_panes(op.assigner)

    def bucket(self, kg: int, bucket: int, between: cellkeys.Between) -> dict[bytes, list[Any]]:
        got = cellkeys.window_cells(between, kg, self.op.state_id, bucket, [self.end])
        rows = got.get(self.end, {})
        assigner = self.op.assigner
        if not self.panes or not isinstance(assigner, SlidingWindows):
            return rows
        ends = assigner.panes_of(self.end)
        panes = cellkeys.window_cells(between, kg, self.op.pane_state_id, bucket, ends)
        by_key: dict[bytes, dict[int, list[Any]]] = {}
        for pane, pane_rows in panes.items():
            for key, slots in pane_rows.items():
                if key not in rows:
                    by_key.setdefault(key, {})[pane] = slots
        for key, key_panes in by_key.items():
            composed = compose_stored(assigner, self.plan.merge, {}, key_panes).get(self.end)
            if composed is not None:
                rows[key] = composed
        return rows


def _cursor(cursor: str | None, m: int) -> cellkeys.CellPosition:
    """Where a page starts; a 400 for a cursor this route did not give out."""
    if cursor is None:
        return cellkeys.CellPosition(0, 0, None)
    try:
        return cellkeys.CellPosition.decode(cursor, m)
    except keylist.BadCursor as exc:
        raise ApiError(
            400,
            "invalid_cursor",
            f"cursor {cursor[:40]!r} is not one this API gave out ({exc}); pass the "
            "next_cursor of the previous page, or start again without a cursor",
        ) from None


def window_slots(
    handle: JobHandle, grid: _Grid, start: int, consistency: Consistency = "live"
) -> Iterator[tuple[list[str], list[list[Any]]]]:
    """Every key of window ``start`` with its accumulator slots, a page of keys at a time, in
    the listing's order (``/top``'s ranking of a retained window reads it whole)."""
    op, end = grid.op, grid.end_of(start)
    source = StateSource(handle, consistency)
    reader = _WindowReader(handle, op, end)
    m = handle.job.max_parallelism
    at = cellkeys.CellPosition(0, 0, None)
    while True:
        page = cellkeys.list_window(source.between, m, at, MAX_PAGE, reader.bucket)
        if page.found:
            keys = [raw.decode(errors="replace") for _, raw, _ in page.found]
            yield keys, [slots for _, _, slots in page.found]
        if page.next is None:
            return
        at = page.next


def window_page(
    handle: JobHandle,
    grid: _Grid,
    start: int,
    after: cellkeys.CellPosition,
    limit: int,
    consistency: Consistency,
) -> tuple[dict[str, Any], int]:
    """One page of the answer, and the positions it examined."""
    op, end = grid.op, grid.end_of(start)
    source = StateSource(handle, consistency)
    reader = _WindowReader(handle, op, end)
    m = handle.job.max_parallelism
    wm, checkpoint = source.as_of(op.name)
    page = cellkeys.list_window(source.between, m, after, limit, reader.bucket)
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
    """Every key with a window starting at ``start`` (epoch ms), in the cells' order, with that
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
