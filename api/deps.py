"""FastAPI dependencies: the registry of running jobs, the app's metrics, job/operator
look-ups, and the freshness bound a read may carry."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Literal

import anyio
from fastapi import Query, Request

from weir.api.errors import ApiError, not_found
from weir.api.metrics import ApiMetrics
from weir.api.registry import JobHandle, Registry
from weir.base.errors import StateError
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.state.secondary import CATCH_UP_MS

DEFAULT_TIMEOUT_MS = 5_000
MAX_TIMEOUT_MS = 60_000
POLL_S = 0.025
# a secondary reader answers from a catch-up that started at most twice its interval ago
# (state.secondary): waiting that long once the bound is met makes the read's state come from a
# catch-up that started after the writes the bound vouches for
CATCH_UP_S = 2 * CATCH_UP_MS / 1000 + 0.001
_SETTLED = frozenset({"finished", "failed", "stopped", "cancelled"})


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


def operator(handle: JobHandle, op: str) -> WindowNode | ProcessNode:
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


@dataclass(frozen=True, slots=True)
class Freshness:
    """How fresh the state a read answers from must be: its watermark at least
    ``min_watermark`` and its checkpoint at least ``min_checkpoint``, waited for up to
    ``timeout_ms``."""

    min_watermark: int | None = None
    min_checkpoint: int | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    @property
    def bounded(self) -> bool:
        return self.min_watermark is not None or self.min_checkpoint is not None

    def met(self, watermark: int, checkpoint: int | None) -> bool:
        if self.min_watermark is not None and watermark < self.min_watermark:
            return False
        return self.min_checkpoint is None or (
            checkpoint is not None and checkpoint >= self.min_checkpoint
        )


async def freshness(
    min_watermark: Annotated[
        int | None, Query(description="wait until the served state's watermark is >= this (ms)")
    ] = None,
    min_checkpoint: Annotated[
        int | None, Query(description="wait until the served state's checkpoint is >= this id")
    ] = None,
    timeout_ms: Annotated[
        int, Query(ge=0, le=MAX_TIMEOUT_MS, description="how long to wait before a 409")
    ] = DEFAULT_TIMEOUT_MS,
) -> Freshness:
    return Freshness(min_watermark, min_checkpoint, timeout_ms)


Consistency = Literal["live", "committed"]


def served(handle: JobHandle, op: str, consistency: Consistency) -> tuple[int, int | None]:
    """The watermark and checkpoint a read of ``op`` answers as of (as the answers report
    them): the live operator's and the job's latest checkpoint, or the committed view's."""
    if consistency == "live":
        return handle.runtime.state_watermark(op), handle.runtime.last_checkpoint
    try:
        view = handle.committed_view()
    except StateError:  # still downloading: not there yet
        view = None
    return (MIN_WATERMARK, None) if view is None else (view.watermark, view.id)


def _settled(handle: JobHandle, consistency: Consistency, checkpoint: int | None) -> bool:
    """Whether the served state can still move: not once the job has stopped (and, for a
    committed read, the view holds its last checkpoint)."""
    if handle.runtime.state() not in _SETTLED:
        return False
    return consistency == "live" or checkpoint == handle.runtime.last_checkpoint


async def wait_fresh(
    fresh: Freshness, handle: JobHandle, op: str, consistency: Consistency = "live"
) -> None:
    """Returns once the state ``op`` is read from meets ``fresh``; raises a 409
    ``not_fresh_enough`` with the current values past the timeout (at once when the job has
    stopped short of it). Polls from a worker thread, sleeping on the event loop between."""
    if not fresh.bounded:
        return
    deadline = time.monotonic() + fresh.timeout_ms / 1000
    while True:
        wm, ck = await anyio.to_thread.run_sync(served, handle, op, consistency)
        if fresh.met(wm, ck):
            if consistency == "live":
                await anyio.sleep(CATCH_UP_S)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise _not_fresh(fresh, handle, op, wm, ck, f"within timeout_ms={fresh.timeout_ms}")
        if await anyio.to_thread.run_sync(_settled, handle, consistency, ck):
            raise _not_fresh(fresh, handle, op, wm, ck, "and the job has stopped")
        await anyio.sleep(min(POLL_S, left))


def _not_fresh(
    fresh: Freshness, handle: JobHandle, op: str, wm: int, ck: int | None, why: str
) -> ApiError:
    wanted = []
    if fresh.min_watermark is not None:
        wanted.append(f"min_watermark={fresh.min_watermark} (watermark {public_watermark(wm)})")
    if fresh.min_checkpoint is not None:
        wanted.append(f"min_checkpoint={fresh.min_checkpoint} (checkpoint {ck})")
    return ApiError(
        409,
        "not_fresh_enough",
        f"operator {op!r} of job {handle.job.name!r} did not reach {' and '.join(wanted)} "
        f"{why}; retry, raise timeout_ms (up to {MAX_TIMEOUT_MS}) or ask for less",
        extra={"watermark": public_watermark(wm), "checkpoint": ck},
    )


__all__ = [
    "MAX_WATERMARK",
    "Consistency",
    "Freshness",
    "api_metrics",
    "freshness",
    "job_handle",
    "operator",
    "public_watermark",
    "registry",
    "served",
    "wait_fresh",
]
