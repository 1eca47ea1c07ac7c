"""``GET /jobs``, ``GET /jobs/{job}``, ``GET /jobs/{job}/checkpoints``, ``GET /health``: read
only (the admin routes, which change things, are in ``admin.py``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from weir.api.deps import job_handle, public_watermark, registry
from weir.api.errors import ErrorBody
from weir.api.models import CheckpointList, Health, JobDetail, JobsAnswer
from weir.api.registry import JobRuntime, Registry

router = APIRouter(tags=["jobs"])


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "a job has failed (``problems`` says why)"}},
)
def health(reg: Annotated[Registry, Depends(registry)], response: Response) -> dict[str, Any]:
    """200 ``ok``; 200 ``degraded`` while a job goes on but something needs a look (its last
    checkpoint failed; from ``weir api``, the job manager's status is missing or stale); 503
    ``failed`` once a job has stopped for good on a failure, so probes and load balancers see it."""
    states = {name: h.runtime.state() for name, h in reg.jobs.items()}
    problems = {
        name: problem
        for name, h in reg.jobs.items()
        if (problem := _problem(h.runtime, states[name])) is not None
    }
    if "failed" in states.values():
        status = "failed"
        response.status_code = 503
    elif problems:
        status = "degraded"
    else:
        status = "ok"
    return {"status": status, "jobs": states, "problems": problems}


def _problem(runtime: JobRuntime, state: str) -> str | None:
    if state == "failed":
        failure = getattr(runtime, "failure", None)
        return str(failure) if failure is not None else "the job failed (see its log)"
    problem = getattr(runtime, "status_problem", None) or getattr(
        runtime, "checkpoint_problem", None
    )
    return None if problem is None else str(problem)


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
        "source": getattr(h.runtime, "source", None) or h.source,
        "parallelism": h.runtime.parallelism,
        "max_parallelism": h.job.max_parallelism,
        "watermark": public_watermark(min(marks)) if marks and len(marks) == len(workers) else None,
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
