"""Response models (they make the OpenAPI document complete)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ErrorDetail(BaseModel):
    """The ``error`` of every 4xx/5xx body: a stable code and a message naming the problem."""

    code: str
    message: str


class WindowOut(BaseModel):
    """One window: ``start``, ``end``, the operator's aggregate fields, ``final``."""

    model_config = ConfigDict(extra="allow")
    start: int
    end: int
    final: bool


class StateAnswer(BaseModel):
    job: str
    op: str
    key: str | None  # the key's value: null for the NULL key (its path form is \N)
    key_group: int
    watermark: int | None
    checkpoint: int | None
    consistency: str
    windows: list[WindowOut]
    state: dict[str, Any] | None = None  # a process function's states, by name


class BroadcastAnswer(BaseModel):
    """A keyed broadcast operator's broadcast states, as worker 0 holds them (every worker
    holds the same): each state's entries as ``[key, value]`` pairs, in key order."""

    job: str
    op: str
    watermark: int | None
    checkpoint: int | None
    consistency: str
    states: dict[str, list[list[Any]]]


class WindowKey(BaseModel):
    """One key's window in a window listing: ``key``, ``key_group``, the aggregates, ``final``."""

    model_config = ConfigDict(extra="allow")
    key: str | None  # null for the NULL key
    key_group: int
    final: bool


class WindowKeys(BaseModel):
    """One page of the keys with a window starting at ``start``, ordered by key; the listing
    goes on while ``next_cursor`` is not null (``GET /{job}/{op}/windows/{start}``)."""

    job: str
    op: str
    start: int
    end: int
    watermark: int | None
    checkpoint: int | None
    consistency: str
    keys: list[WindowKey]
    next_cursor: str | None


class LookupAnswer(BaseModel):
    """Per key asked, in order: its point answer, or ``{"key", "error"}``."""

    job: str
    op: str
    results: list[dict[str, Any]]


class NotFreshEnough(BaseModel):
    """409: the state did not reach the freshness bound in time; what it is at now."""

    error: ErrorDetail
    watermark: int | None
    checkpoint: int | None


class JobSummary(BaseModel):
    name: str
    state: str
    parallelism: int
    operators: list[str]


class JobsAnswer(BaseModel):
    jobs: list[JobSummary]


class JobDetail(BaseModel):
    name: str
    state: str
    source: str
    parallelism: int
    max_parallelism: int
    watermark: int | None
    records_in: int
    dead_letters: int
    operators: list[dict[str, Any]]
    workers: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]
    last_checkpoint: int | None = None
    restarts: int = 0
    backfills: list[dict[str, Any]] = []


class Health(BaseModel):
    status: str  # ok, degraded (processing goes on; problems say what to look at) or failed
    jobs: dict[str, str]
    problems: dict[str, str] = {}


class KeyList(BaseModel):
    job: str
    op: str
    keys: list[str]
    next_cursor: str | None


class CheckpointSummary(BaseModel):
    id: int
    job: str
    time: int
    savepoint: bool
    parallelism: int
    max_parallelism: int
    key_group_ranges: list[list[int]]
    size: int
    incremental_size: int
    duration_ms: float
    sync_ms: float
    async_ms: float
    watermark: int | None


class CheckpointList(BaseModel):
    job: str
    storage: str
    latest: int | None
    restored_from: str | None
    restarts: int
    checkpoints: list[CheckpointSummary]


class BackfillAnswer(BaseModel):
    model_config = ConfigDict(extra="allow")
    op: str
    min_end: int
    max_end: int
    windows: int | None
    time: int


class SavepointAnswer(BaseModel):
    id: int
    path: str


class TopEntry(BaseModel):
    key: str
    value: float


class TopWindow(BaseModel):
    start: int
    end: int


class TopAnswer(BaseModel):
    job: str
    op: str
    by: str
    window: TopWindow
    watermark: int | None
    keys: list[TopEntry]


class SqlAnswer(BaseModel):
    """A pull query's answer (``POST /{job}/sql``): its rows, as of ``watermark`` and
    ``checkpoint``; ``next_cursor`` resumes a query paged past its scan budget."""

    job: str
    table: str
    consistency: str
    watermark: int | None
    checkpoint: int | None
    columns: list[str]
    rows: list[dict[str, Any]]
    keys_read: int
    next_cursor: str | None
