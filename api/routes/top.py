"""``GET /{job}/{op}/top``: the top-N keys of a window by an aggregate.

For the latest and the current window, each worker keeps its own top keys
(``engine/runtime/operators/topn.py``) and reports them with its status; this route merges them
(``engine/runtime/stored/ranking.py``). Keys are partitioned across workers and ranked by
``(-value, key)``, so the merge is exact for ``n`` up to the engine's ``TOP_K``, and such a
request scans no keys. Any other retained window (``window=<start>``, a start as the windows
route takes it) is ranked from state: every key of that window is read, a page at a time, as
``GET /{job}/{op}/windows/{start}`` lists them, keeping only the best ``n`` so far.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response

from weir.api.deps import (
    Freshness,
    freshness,
    job_handle,
    operator,
    public_watermark,
    registry,
    wait_fresh,
)
from weir.api.errors import ApiError, ErrorBody
from weir.api.models import TopAnswer
from weir.api.registry import JobHandle, Registry
from weir.api.routes.state import NOT_FRESH, json_response
from weir.api.routes.windows import grid_of, window_slots
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.runtime.messages import RankedWindow
from weir.engine.runtime.stored import TOP_K, best, finite_number, uses_panes
from weir.engine.windows import SessionWindows

router = APIRouter(tags=["state"])

Kept = Literal["latest", "current"]


def _window(raw: str) -> Kept | int:
    """``latest``, ``current`` or a window start (epoch ms); a 400 for anything else."""
    if raw == "latest":
        return "latest"
    if raw == "current":
        return "current"
    try:
        return int(raw)
    except ValueError:
        raise ApiError(
            400,
            "invalid_window",
            f"window={raw[:40]!r} is not latest, current or a window start; pass e.g. "
            "window=latest, or the start (epoch ms) of a retained window, as "
            "GET /{job}/{op}/windows/{start} takes it",
        ) from None


@router.get(
    "/{job}/{op}/top",
    operation_id="top",
    response_model=TopAnswer,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, **NOT_FRESH},
)
async def top(
    job: str,
    op: str,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    fresh: Annotated[Freshness, Depends(freshness)],
    by: Annotated[str, Query(description="the aggregate to rank by (highest first)")],
    n: Annotated[int, Query(ge=1, le=TOP_K, description="how many keys")] = 10,
    window: Annotated[
        str,
        Query(
            description="latest: the last fired window; current: the newest open one; or the "
            "start (epoch ms) of any retained window, which is ranked from state",
            examples=["latest", "current", "1700000000000"],
        ),
    ] = "latest",
) -> Response:
    """``{"job","op","by","window":{"start","end"},"watermark","keys":[{"key","value"}]}``:
    the ``n`` keys with the highest ``by`` in the window, ties by key."""
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
    which = _window(window)
    if (
        isinstance(op_def, ProcessNode)
        or isinstance(op_def.assigner, SessionWindows)
        or op_def.triggered
    ):
        raise ApiError(
            400,
            "top_unsupported",
            f"operator {op!r} has no shared windows to rank; top-N needs tumbling or sliding "
            "windows without a trigger or evictor",
        )
    if by not in op_def.aggregates:
        raise ApiError(
            400,
            "unknown_aggregate",
            f"operator {op!r} has no aggregate {by!r}; use one of {', '.join(op_def.aggregates)}",
        )
    if which == "current" and uses_panes(op_def.assigner):
        raise ApiError(
            400,
            "top_unsupported",
            "window=current is kept for tumbling windows; use window=latest for sliding ones",
        )
    if isinstance(which, int):
        grid_of(handle, op).end_of(which)  # a 400 naming the starts there are
    await wait_fresh(fresh, handle, op)
    if isinstance(which, int):
        body = await anyio.to_thread.run_sync(_ranked_from_state, handle, op_def, by, n, which)
    else:
        body = await anyio.to_thread.run_sync(_ranked, handle, op_def, by, n, which)
    return json_response(body, request)


def _ranked(handle: JobHandle, op_def: WindowNode, by: str, n: int, window: Kept) -> dict[str, Any]:
    job, op = handle.job.name, op_def.name
    reports: list[RankedWindow] = []
    for w in handle.runtime.worker_status():
        status = w["operators"].get(op)
        top = status["top"] if status is not None else None
        found = top[window] if top is not None else None
        if found is not None:
            reports.append(found)
    if not reports:
        what = "no window has fired yet" if window == "latest" else "no window is open"
        raise ApiError(404, "window_not_found", f"operator {op!r} of job {job!r}: {what}")
    end = max(r["end"] for r in reports)
    pairs = [(key, value) for r in reports if r["end"] == end for key, value in r["by"].get(by, [])]
    if not pairs and any(r["end"] == end and r["by"] for r in reports):
        raise ApiError(
            400, "unknown_aggregate", f"aggregate {by!r} has no numeric values to rank by"
        )
    start = next(r["start"] for r in reports if r["end"] == end)
    return _answer(handle, op_def, by, start, end, best(pairs, n))


def _ranked_from_state(
    handle: JobHandle, op_def: WindowNode, by: str, n: int, start: int
) -> dict[str, Any]:
    """Window ``start`` ranked from every key's stored window; a 404 when no key has it (it
    has not begun, or retention dropped it)."""
    grid = grid_of(handle, op_def.name)
    end = grid.end_of(start)
    plan = handle.plan(op_def)
    ranked: list[tuple[str, int | float]] = []
    seen = 0
    for keys, slots in window_slots(handle, grid, start):
        seen += len(keys)
        values = plan.column(by, slots)
        pairs = [(k, v) for k, v in zip(keys, values, strict=True) if finite_number(v)]
        ranked = best([*ranked, *pairs], n)
    if not seen:
        raise ApiError(
            404,
            "window_not_found",
            f"operator {op_def.name!r} of job {handle.job.name!r} holds no key in window "
            f"[{start}, {end}): it has not begun, or state retention dropped it "
            "(weir run --state-retention-ms; 0 keeps every window)",
        )
    return _answer(handle, op_def, by, start, end, ranked)


def _answer(
    handle: JobHandle,
    op_def: WindowNode,
    by: str,
    start: int,
    end: int,
    ranked: list[tuple[str, int | float]],
) -> dict[str, Any]:
    return {
        "job": handle.job.name,
        "op": op_def.name,
        "by": by,
        "window": {"start": start, "end": end},
        "watermark": public_watermark(handle.runtime.operator_watermark(op_def.name)),
        "keys": [{"key": k, "value": v} for k, v in ranked],
    }
