"""What each client method sends and how its answer is read: one ``Call`` per route, shared by
``Client`` and ``AsyncClient`` so the two cannot drift apart."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import orjson
from pydantic import BaseModel

from weir.api.client._exceptions import WeirClientError
from weir.api.models import (
    BroadcastAnswer,
    CheckpointList,
    ErrorDetail,
    Health,
    JobDetail,
    JobsAnswer,
    KeyList,
    SavepointAnswer,
    SqlAnswer,
    StateAnswer,
    TopAnswer,
    WindowKeys,
)

T = TypeVar("T")
Consistency = Literal["live", "committed"]
# latest, current, or the start (epoch ms) of any retained window
Window = Literal["latest", "current"] | int


class LookupMiss(BaseModel):
    """A key of a batch lookup that has no answer: ``{"key", "error": {"code", "message"}}``."""

    key: str
    error: ErrorDetail


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a key's stream: the key's answer, or the error the stream said instead
    (e.g. ``key_not_found`` until the key has state). ``id`` is the answer's ETag."""

    id: str
    answer: StateAnswer | None
    error: ErrorDetail | None


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A request and the parser of its answer. ``ok``: statuses that are answers (``/health``
    answers 503 with a body); ``retry``: whether a 503 or a failed connection is retried (not
    for requests that change the job); ``wait_s``: how long the server may hold the answer
    (``timeout_ms``), added to the read timeout."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    retry: bool = True
    ok: frozenset[int] = frozenset({200})
    wait_s: float = 0.0


def seg(value: str | int) -> str:
    """A path segment: keys may hold ``/``, ``?``, ``#`` or any unicode."""
    return quote(str(value), safe="")


# the NULL key's path form, ``weir.state.keygroups.NULL_KEY`` (the client imports no part of the
# engine; a test holds the two equal): a string shaped like it takes one more backslash
NULL_KEY = "\\N"
_SHIFTED = re.compile(r"\\+N")


def path_key(key: str | int | None) -> str:
    """A key as a URL's path names it (``keygroups.canonical_key``): ``None`` (the NULL key,
    SQL's ``GROUP BY`` over a NULL) is ``\\N``, a string shaped like ``\\N`` is escaped."""
    if key is None:
        return NULL_KEY
    if isinstance(key, str):
        return "\\" + key if _SHIFTED.fullmatch(key) else key
    return str(key)


def fresh(
    params: dict[str, Any],
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> float:
    """Adds the freshness bound to ``params``; returns how long the server may wait, in s."""
    if min_watermark is not None:
        params["min_watermark"] = min_watermark
    if min_checkpoint is not None:
        params["min_checkpoint"] = min_checkpoint
    if timeout_ms is not None:
        params["timeout_ms"] = timeout_ms
    if min_watermark is None and min_checkpoint is None:
        return 0.0
    return (timeout_ms if timeout_ms is not None else 5_000) / 1000


def _model(cls: type[BaseModel]) -> Callable[[Any], Any]:
    return cls.model_validate


def health() -> Call[Health]:
    return Call("GET", "/health", _model(Health), retry=False, ok=frozenset({200, 503}))


def jobs() -> Call[JobsAnswer]:
    return Call("GET", "/jobs", _model(JobsAnswer))


def job(name: str) -> Call[JobDetail]:
    return Call("GET", f"/jobs/{seg(name)}", _model(JobDetail))


def checkpoints(name: str) -> Call[CheckpointList]:
    return Call("GET", f"/jobs/{seg(name)}/checkpoints", _model(CheckpointList))


def savepoint(name: str, timeout_ms: int) -> Call[SavepointAnswer]:
    params = {"timeout_ms": timeout_ms}
    path = f"/jobs/{seg(name)}/savepoints"
    return Call(
        "POST", path, _model(SavepointAnswer), params, retry=False, wait_s=timeout_ms / 1000
    )


def backfill(name: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", f"/jobs/{seg(name)}/backfills", dict, json=body, retry=False, wait_s=600)


def state(
    job: str,
    op: str,
    key: str | None,
    *,
    from_: int | None,
    to: int | None,
    limit: int | None,
    consistency: Consistency,
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> Call[StateAnswer]:
    params: dict[str, Any] = {"consistency": consistency}
    for name, value in (("from", from_), ("to", to), ("limit", limit)):
        if value is not None:
            params[name] = value
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    path = f"/{seg(job)}/{seg(op)}/state/{seg(path_key(key))}"
    return Call("GET", path, _model(StateAnswer), params, wait_s=wait)


def keys_page(job: str, op: str, prefix: str, cursor: str | None, limit: int) -> Call[KeyList]:
    params: dict[str, Any] = {"prefix": prefix, "limit": limit}
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", f"/{seg(job)}/{seg(op)}/state", _model(KeyList), params)


def _lookup_results(body: Any) -> list[StateAnswer | LookupMiss]:
    return [
        LookupMiss.model_validate(r) if "error" in r else StateAnswer.model_validate(r)
        for r in body["results"]
    ]


def lookup(
    job: str,
    op: str,
    keys: list[str | None],
    *,
    from_: int | None,
    to: int | None,
    limit: int | None,
    consistency: Consistency,
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> Call[list[StateAnswer | LookupMiss]]:
    body: dict[str, Any] = {"keys": list(map(path_key, keys)), "consistency": consistency}
    for name, value in (("from", from_), ("to", to), ("limit", limit)):
        if value is not None:
            body[name] = value
    params: dict[str, Any] = {}
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    path = f"/{seg(job)}/{seg(op)}/lookup"
    return Call("POST", path, _lookup_results, params, json=body, wait_s=wait)


def sql(
    job: str,
    query: str,
    *,
    consistency: Consistency = "live",
    budget: int | None = None,
    cursor: str | None = None,
    min_watermark: int | None = None,
    min_checkpoint: int | None = None,
    timeout_ms: int | None = None,
) -> Call[SqlAnswer]:
    body: dict[str, Any] = {"query": query, "consistency": consistency}
    if budget is not None:
        body["budget"] = budget
    if cursor is not None:
        body["cursor"] = cursor
    params: dict[str, Any] = {}
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    return Call("POST", f"/{seg(job)}/sql", _model(SqlAnswer), params, json=body, wait_s=wait)


def top(
    job: str,
    op: str,
    by: str,
    n: int,
    window: Window,
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> Call[TopAnswer]:
    params: dict[str, Any] = {"by": by, "n": n, "window": window}
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    return Call("GET", f"/{seg(job)}/{seg(op)}/top", _model(TopAnswer), params, wait_s=wait)


def broadcast_state(
    job: str,
    op: str,
    consistency: Consistency,
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> Call[BroadcastAnswer]:
    params: dict[str, Any] = {"consistency": consistency}
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    path = f"/{seg(job)}/{seg(op)}/broadcast"
    return Call("GET", path, _model(BroadcastAnswer), params, wait_s=wait)


def window_page(
    job: str,
    op: str,
    start: int,
    cursor: str | None,
    limit: int,
    consistency: Consistency,
    min_watermark: int | None,
    min_checkpoint: int | None,
    timeout_ms: int | None,
) -> Call[WindowKeys]:
    params: dict[str, Any] = {"limit": limit, "consistency": consistency}
    if cursor is not None:
        params["cursor"] = cursor
    wait = fresh(params, min_watermark, min_checkpoint, timeout_ms)
    path = f"/{seg(job)}/{seg(op)}/windows/{start}"
    return Call("GET", path, _model(WindowKeys), params, wait_s=wait)


def stream_token(job: str | None, ttl_s: int | None) -> Call[dict[str, Any]]:
    params: dict[str, Any] = {}
    if job is not None:
        params["job"] = job
    if ttl_s is not None:
        params["ttl_s"] = ttl_s
    return Call("POST", "/auth/stream-token", dict, params)


def stream_path(job: str, op: str, key: str | None) -> str:
    return f"/{seg(job)}/{seg(op)}/state/{seg(path_key(key))}/stream"


def stream_event(event_id: str, data: str, event: str = "message") -> StreamEvent:
    """An event of a key's stream: the key's answer (a ``message``), or an ``error`` event's
    ``{"error": ...}`` while it has none."""
    body = orjson.loads(data)
    if event == "error":
        return StreamEvent(event_id, None, ErrorDetail.model_validate(body["error"]))
    return StreamEvent(event_id, StateAnswer.model_validate(body), None)


def to_pandas(rows: StateAnswer | WindowKeys | Iterable[BaseModel]) -> Any:
    """A ``pandas.DataFrame``, one row per window: a key's windows (``StateAnswer``, with a
    ``key`` column), or the keys of one window (``WindowKeys`` pages or rows)."""
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        raise WeirClientError(
            "to_pandas() needs pandas, which is not installed here; pip install pandas "
            "(or read the answers' models directly)"
        ) from None
    if isinstance(rows, StateAnswer):
        records = [{"key": rows.key, **w.model_dump()} for w in rows.windows]
    elif isinstance(rows, WindowKeys):
        records = [r.model_dump() for r in rows.keys]
    else:
        records = [r.model_dump() for r in rows]
    return pandas.DataFrame.from_records(records)
