"""FastAPI dependencies: the registry of running jobs, the app's metrics, and job/operator
look-ups."""

from __future__ import annotations

from fastapi import Request

from weir.api.errors import not_found
from weir.api.metrics import ApiMetrics
from weir.api.registry import JobHandle, Registry
from weir.engine.job import ProcessOperator, WindowOperator
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK


async def registry(request: Request) -> Registry:
    reg: Registry = request.app.state.registry
    return reg


async def api_metrics(request: Request) -> ApiMetrics:
    found: ApiMetrics = request.app.state.metrics
    return found


def job_handle(reg: Registry, job: str) -> JobHandle:
    handle = reg.jobs.get(job)
    if handle is None:
        known = ", ".join(sorted(reg.jobs)) or "none"
        raise not_found("job_not_found", f"job {job!r} not found; running jobs: {known}")
    return handle


def operator(handle: JobHandle, op: str) -> WindowOperator | ProcessOperator:
    found = handle.job.operators.get(op)
    if found is None:
        known = ", ".join(handle.job.operators) or "none"
        raise not_found(
            "operator_not_found",
            f"operator {op!r} not found in job {handle.job.name!r}; operators: {known}",
        )
    return found


def public_watermark(wm: int) -> int | None:
    """Watermarks as JSON: ``None`` before the first one; the end-of-input mark stays as is."""
    return None if wm == MIN_WATERMARK else wm


__all__ = ["MAX_WATERMARK", "api_metrics", "job_handle", "operator", "public_watermark", "registry"]
