"""``GET /{job}/{op}/top``: the top-N keys of a window by an aggregate.

Each worker keeps its own top keys (``engine/runtime/operators/topn.py``) and reports them with
its status; this route merges them (``engine/runtime/stored/ranking.py``). Keys are
partitioned across workers and ranked by ``(-value, key)``, so the merge is exact for ``n`` up
to the engine's ``TOP_K``. No request scans keys.
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
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.runtime.messages import RankedWindow
from weir.engine.runtime.stored import TOP_K, best, uses_panes
from weir.engine.windows import SessionWindows

router = APIRouter(tags=["state"])


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
        Literal["latest", "current"],
        Query(description="latest: the last fired window; current: the newest open one"),
    ] = "latest",
) -> Response:
    """``{"job","op","by","window":{"start","end"},"watermark","keys":[{"key","value"}]}``:
    the ``n`` keys with the highest ``by`` in the window, ties by key."""
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
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
    if window == "current" and uses_panes(op_def.assigner):
        raise ApiError(
            400,
            "top_unsupported",
            "window=current is kept for tumbling windows; use window=latest for sliding ones",
        )
    await wait_fresh(fresh, handle, op)
    body = await anyio.to_thread.run_sync(_ranked, handle, op_def, by, n, window)
    return json_response(body, request)


def _ranked(
    handle: JobHandle, op_def: WindowNode, by: str, n: int, window: Literal["latest", "current"]
) -> dict[str, Any]:
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
    body: dict[str, Any] = {
        "job": job,
        "op": op,
        "by": by,
        "window": {"start": start, "end": end},
        "watermark": public_watermark(handle.runtime.operator_watermark(op)),
        "keys": [{"key": k, "value": v} for k, v in best(pairs, n)],
    }
    return body
