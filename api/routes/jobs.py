"""``GET /jobs``, ``GET /jobs/{job}``, ``GET /health``."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from api.deps import job_handle, public_watermark, registry
from api.errors import ApiError, ErrorBody
from api.models import CheckpointList, Health, JobDetail, JobsAnswer, SavepointAnswer
from api.registry import Registry
from engine.errors import WeirError

router = APIRouter(tags=["jobs"])


@router.get("/health", response_model=Health)
def health(reg: Annotated[Registry, Depends(registry)]) -> dict[str, Any]:
    states = {name: h.runtime.state() for name, h in reg.jobs.items()}
    problems = {
        name: str(problem)
        for name, h in reg.jobs.items()
        if (problem := getattr(h.runtime, "checkpoint_problem", None))
    }
    if any(s == "failed" for s in states.values()):
        status = "failed"
    elif problems:
        status = "degraded"  # processing goes on; the last checkpoint could not be taken
    else:
        status = "ok"
    return {"status": status, "jobs": states, "problems": problems}


@router.get("/jobs", response_model=JobsAnswer)
def list_jobs(reg: Annotated[Registry, Depends(registry)]) -> dict[str, Any]:
    return {
        "jobs": [
            {
                "name": name,
                "state": h.runtime.state(),
                "parallelism": h.runtime.parallelism,
                "operators": list(h.job.operators),
            }
            for name, h in sorted(reg.jobs.items())
        ]
    }


@router.get("/jobs/{job}", response_model=JobDetail, responses={404: {"model": ErrorBody}})
def get_job(job: str, reg: Annotated[Registry, Depends(registry)]) -> dict[str, Any]:
    h = job_handle(reg, job)
    workers = h.runtime.worker_status()
    operators = []
    for name, op in h.job.operators.items():
        per_worker = [w.get("operators", {}).get(name, {}) for w in workers]
        operators.append(
            {
                **op.describe(),
                "watermark": public_watermark(h.runtime.operator_watermark(name)),
                "records_in": sum(s.get("records_in", 0) for s in per_worker),
                "results_out": sum(s.get("results_out", 0) for s in per_worker),
                "late_records": sum(s.get("late", 0) for s in per_worker),
                "open_windows": sum(s.get("open_windows", 0) for s in per_worker),
            }
        )
    marks = [w["watermark"] for w in workers if "watermark" in w]
    return {
        "name": job,
        "state": h.runtime.state(),
        "source": h.source,
        "parallelism": h.runtime.parallelism,
        "max_parallelism": h.job.max_parallelism,
        "watermark": public_watermark(min(marks)) if len(marks) == len(workers) else None,
        "records_in": sum(w.get("records_in", 0) for w in workers),
        "dead_letters": sum(w.get("dead_letters", 0) for w in workers),
        "operators": operators,
        "workers": [
            {
                "index": i,
                "key_groups": h.runtime.ranges[i].to_json(),
                "watermark": public_watermark(w["watermark"]) if "watermark" in w else None,
                "splits": w.get("splits", []),
                "source_lag": w.get("source_lag", {}),
                "records_in": w.get("records_in", 0),
                "records_sent": w.get("records_sent", 0),
                "records_received": w.get("records_received", 0),
                "backpressure": w.get("backpressure", 0.0),
                "pending_bytes": w.get("pending_bytes", 0),
                "dead_letters": w.get("dead_letters", 0),
                "dead_letters_by_stage": w.get("dead_letters_by_stage", {}),
                "finished": w.get("finished", False),
                "run_started_at": w.get("run_started_at"),
                "first_record_at": w.get("first_record_at") or None,
                "restored_from": w.get("restored_from"),
                "finished_at": w.get("finished_at") or None,
            }
            for i, w in enumerate(workers)
        ],
        "checkpoints": [
            {**c, "watermark": public_watermark(c["watermark"])}
            for c in reversed(h.runtime.checkpoints[-10:])
        ],
        "last_checkpoint": h.runtime.last_checkpoint,
        "backfills": getattr(h.runtime, "backfills", []),
        "restarts": getattr(h.runtime, "restarts", 0),
    }


@router.get(
    "/jobs/{job}/checkpoints",
    response_model=CheckpointList,
    responses={404: {"model": ErrorBody}},
)
def list_checkpoints(job: str, reg: Annotated[Registry, Depends(registry)]) -> dict[str, Any]:
    """The job's complete checkpoints and savepoints in its storage, newest first."""
    h = job_handle(reg, job)
    storage = h.runtime.storage
    found = [
        {**c, "watermark": public_watermark(c.get("watermark", 0))} for c in storage.summaries()
    ]
    restored = getattr(h.runtime, "restored_from", None)
    return {
        "job": job,
        "storage": str(storage.base.resolve()),
        "latest": h.runtime.last_checkpoint,
        "restored_from": str(restored) if restored else None,
        "restarts": getattr(h.runtime, "restarts", 0),
        "checkpoints": found,
    }


class BackfillRequest(BaseModel):
    op: str = Field(description="the window operator the backfill computed")
    path: str = Field(description="absolute path of the backfill's SST directory")
    min_end: int
    max_end: int
    windows: int | None = None


@router.post(
    "/jobs/{job}/backfills",
    responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def load_backfill(
    job: str, body: BackfillRequest, reg: Annotated[Registry, Depends(registry)]
) -> dict[str, Any]:
    """Load ``weir backfill``'s SST files into the running job (what ``weir backfill --live``
    calls). Refused, with nothing loaded, when any worker already holds a window in the
    backfill's range."""
    h = job_handle(reg, job)
    try:
        result: dict[str, Any] = await anyio.to_thread.run_sync(
            h.runtime.ingest_backfill, body.model_dump()
        )
    except WeirError as exc:
        raise ApiError(409, "backfill_refused", str(exc)) from None
    return result


@router.post(
    "/jobs/{job}/savepoints",
    response_model=SavepointAnswer,
    responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def take_savepoint(
    job: str,
    reg: Annotated[Registry, Depends(registry)],
    timeout_ms: Annotated[int, Query(ge=1, le=3_600_000)] = 120_000,
) -> dict[str, Any]:
    """Take a savepoint (a checkpoint that is never deleted) and answer when it is complete."""
    h = job_handle(reg, job)
    try:
        result: dict[str, Any] = await anyio.to_thread.run_sync(
            h.runtime.trigger_savepoint, timeout_ms / 1000
        )
    except WeirError as exc:
        raise ApiError(409, "savepoint_failed", str(exc)) from None
    return result
