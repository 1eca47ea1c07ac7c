"""``GET /jobs``, ``GET /jobs/{job}``, ``GET /jobs/{job}/checkpoints``, ``GET /health``: read
only (the admin routes, which change things, are in ``admin.py``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from weir.api.deps import job_handle, public_watermark, registry
from weir.api.errors import ErrorBody
from weir.api.models import CheckpointList, Health, JobDetail, JobsAnswer
from weir.api.registry import JobHandle, Registry
from weir.base.redact import redact_text
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.view import JobRuntime

router = APIRouter(tags=["jobs"])
health_router = APIRouter(tags=["jobs"])  # open to all, with or without a token


@health_router.get(
    "/health",
    operation_id="health",
    response_model=Health,
    responses={503: {"model": Health, "description": "a job has failed (``problems`` says why)"}},
)
def health(reg: Annotated[Registry, Depends(registry)], response: Response) -> dict[str, Any]:
    """200 ``ok``; 200 ``degraded`` while a job goes on but something needs a look (its last
    checkpoint failed; the share of its records sent to the dead letters is above its
    ``--max-dead-letter-ratio``, not judged yet; from ``weir api``, the job manager's status is
    missing or stale); 503
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
    # /health is open to every client: a reason that quotes a URL or setting (a storage
    # error naming AWS_ENDPOINT_URL) loses its secrets here
    if state == "failed":
        return redact_text(runtime.failure_reason or "the job failed (see its log)")
    problem = runtime.status_problem or runtime.checkpoint_problem or runtime.dead_letter_problem
    return None if problem is None else redact_text(problem)


@router.get("/jobs", operation_id="list_jobs", response_model=JobsAnswer)
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


@router.get(
    "/jobs/{job}",
    operation_id="get_job",
    response_model=JobDetail,
    responses={404: {"model": ErrorBody}},
)
def get_job(job: str, reg: Annotated[Registry, Depends(registry)]) -> dict[str, Any]:
    h = job_handle(reg, job)
    workers = h.runtime.worker_status()
    marks = [w["watermark"] for w in workers]
    return {
        "name": job,
        "state": h.runtime.state(),
        "source": h.runtime.source,
        "parallelism": h.runtime.parallelism,
        "max_parallelism": h.job.max_parallelism,
        "watermark": public_watermark(min(marks)) if marks else None,
        "records_in": sum(w["records_in"] for w in workers),
        "dead_letters": sum(w["dead_letters"] for w in workers),
        "operators": _operators(h, workers),
        "workers": [_worker(h, i, w) for i, w in enumerate(workers)],
        "checkpoints": [
            {**c, "watermark": public_watermark(c["watermark"])}
            for c in reversed(h.runtime.checkpoints[-10:])
        ],
        "last_checkpoint": h.runtime.last_checkpoint,
        "backfills": h.runtime.backfills,
        "restarts": h.runtime.restarts,
    }


def _operators(h: JobHandle, workers: list[WorkerStatus]) -> list[dict[str, Any]]:
    """Each operator's description and its counters summed over the workers."""
    operators = []
    for name, op in h.job.operators.items():
        per_worker = [w["operators"][name] for w in workers if name in w["operators"]]
        operators.append(
            {
                **op.describe(),
                "watermark": public_watermark(h.runtime.operator_watermark(name)),
                "state_watermark": public_watermark(h.runtime.state_watermark(name)),
                "records_in": sum(s["records_in"] for s in per_worker),
                "results_out": sum(s["results_out"] for s in per_worker),
                "late_records": sum(s["late"] for s in per_worker),
                "open_windows": sum(s["open_windows"] for s in per_worker),
            }
        )
    return operators


def _worker(h: JobHandle, i: int, w: WorkerStatus) -> dict[str, Any]:
    """Worker ``i`` as ``JobDetail`` shows it, from the status it reported (``w``)."""
    return {
        "index": i,
        "host": w["host"] or None,
        "pid": w["pid"] or None,
        "memory": w["memory"],
        "key_groups": h.runtime.ranges[i].to_json(),
        "watermark": public_watermark(w["watermark"]),
        "splits": w["splits"],
        "source_lag": w["source_lag"],
        "records_in": w["records_in"],
        "records_sent": w["records_sent"],
        "records_received": w["records_received"],
        "backpressure": w["backpressure"],
        "pending_bytes": w["pending_bytes"],
        "dead_letters": w["dead_letters"],
        "dead_letters_by_stage": w["dead_letters_by_stage"],
        "finished": w["finished"],
        "run_started_at": w["run_started_at"] or None,
        "first_record_at": w["first_record_at"] or None,
        "restored_from": w["restored_from"],
        "finished_at": w["finished_at"] or None,
    }


@router.get(
    "/jobs/{job}/checkpoints",
    operation_id="list_checkpoints",
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
    return {
        "job": job,
        "storage": storage.where,
        "latest": h.runtime.last_checkpoint,
        "restored_from": h.runtime.restored_from,
        "restarts": h.runtime.restarts,
        "checkpoints": found,
    }
