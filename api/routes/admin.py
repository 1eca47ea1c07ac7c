"""The admin routes, the only ones that change anything: ``POST /jobs/{job}/savepoints`` and
``POST /jobs/{job}/backfills``. Tagged ``admin``; ``api.app.GuardAdmin`` finds them by that tag
and applies the access rule (README, "Security")."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from weir.api.deps import job_handle, registry
from weir.api.errors import ApiError, ErrorBody
from weir.api.models import BackfillAnswer, SavepointAnswer
from weir.api.registry import Registry
from weir.base.errors import PathRefused, WeirError

ADMIN_TAG = "admin"

router = APIRouter(tags=[ADMIN_TAG])


class BackfillRequest(BaseModel):
    op: str = Field(description="the window operator the backfill computed")
    path: str = Field(
        description="absolute path of the backfill's SST directory, or its s3:// URL, under "
        "the job's --backfill-dir (no '..', no symlink out; in a bucket, by prefix)"
    )
    min_end: int
    max_end: int
    windows: int | None = None


@router.post(
    "/jobs/{job}/backfills",
    operation_id="load_backfill",
    response_model=BackfillAnswer,
    responses={
        400: {"model": ErrorBody},
        403: {"model": ErrorBody},
        404: {"model": ErrorBody},
        409: {"model": ErrorBody},
    },
)
async def load_backfill(
    job: str, body: BackfillRequest, reg: Annotated[Registry, Depends(registry)]
) -> dict[str, Any]:
    """Load ``weir backfill``'s SST files into the running job (what ``weir backfill --live``
    calls). Refused, with nothing loaded, when any worker already holds a window in the
    backfill's range (409), or when the path leaves the job's ``--backfill-dir`` (400)."""
    h = job_handle(reg, job)

    def load() -> Any:
        loaded = h.runtime.ingest_backfill(body.model_dump())
        h.expire_readers()  # the caller reads its history next: no answer from before it
        return loaded

    try:
        result = await anyio.to_thread.run_sync(load)
    except PathRefused as exc:
        raise ApiError(400, "path_refused", str(exc)) from None
    except WeirError as exc:
        raise ApiError(409, "backfill_refused", str(exc)) from None
    return {**result}


@router.post(
    "/jobs/{job}/savepoints",
    operation_id="take_savepoint",
    response_model=SavepointAnswer,
    responses={403: {"model": ErrorBody}, 404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def take_savepoint(
    job: str,
    reg: Annotated[Registry, Depends(registry)],
    timeout_ms: Annotated[int, Query(ge=1, le=3_600_000)] = 120_000,
) -> dict[str, Any]:
    """Take a savepoint (a checkpoint that is never deleted) and answer when it is complete. It
    is written under the job's checkpoint storage; no request chooses where."""
    h = job_handle(reg, job)
    try:
        result = await anyio.to_thread.run_sync(h.runtime.trigger_savepoint, timeout_ms / 1000)
    except WeirError as exc:
        raise ApiError(409, "savepoint_failed", str(exc)) from None
    return {**result}
