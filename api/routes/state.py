"""``GET /{job}/{op}/state/{key}``: a key's windows, read from the owning worker's RocksDB."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query, Response

from api.deps import job_handle, operator, public_watermark, registry
from api.errors import ApiError, ErrorBody, not_found
from api.models import StateAnswer
from api.registry import Registry
from engine.job import ProcessOperator, WindowOperator
from engine.runtime.fold import FoldPlan
from engine.runtime.process_op import decode_state
from engine.runtime.session_op import decode_session
from engine.runtime.sliding_op import compose_stored, pane_size, uses_panes
from engine.runtime.window_op import decode_window
from engine.windows import SessionWindows, SlidingWindows
from state import layout
from state.keygroups import key_group

router = APIRouter(tags=["state"])

MAX_LIMIT = 10_000


@router.get(
    "/{job}/{op}/state/{key:path}",
    response_model=StateAnswer,
    responses={404: {"model": ErrorBody}, 400: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
def get_state(
    job: str,
    op: str,
    key: str,
    reg: Annotated[Registry, Depends(registry)],
    from_: Annotated[
        int | None, Query(alias="from", description="earliest window start, ms")
    ] = None,
    to: Annotated[int | None, Query(description="latest window start (inclusive), ms")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="most recent N windows")] = 1000,
    consistency: Literal["live", "committed"] = "live",
) -> Response:
    handle = job_handle(reg, job)
    operator_def = operator(handle, op)
    if consistency == "committed":
        raise ApiError(
            400,
            "committed_unavailable",
            "consistency=committed reads the latest checkpoint, and this job has none yet; "
            "use consistency=live",
        )
    if from_ is not None and to is not None and to < from_:
        raise ApiError(400, "invalid_range", f"to={to} is before from={from_}; swap them")
    raw_key = key.encode()
    if len(raw_key) > layout.MAX_KEY_BYTES:
        raise ApiError(400, "key_too_long", f"key of {len(raw_key)} bytes exceeds the limit")
    kg = key_group(key, handle.job.max_parallelism)
    prefix = layout.key_prefix(kg, operator_def.state_id, raw_key)
    reader = handle.reader_for(kg)
    rows = reader.scan(prefix, layout.prefix_upper_bound(prefix))
    pane_rows: list[tuple[bytes, bytes]] = []
    if isinstance(operator_def, WindowOperator) and uses_panes(operator_def.assigner):
        pane_prefix = layout.key_prefix(kg, operator_def.pane_state_id, raw_key)
        pane_rows = reader.scan(pane_prefix, layout.prefix_upper_bound(pane_prefix))
    if not rows and not pane_rows:
        raise not_found(
            "key_not_found", f"key {key!r} has no state in operator {op!r} of job {job!r}"
        )
    wm = handle.runtime.operator_watermark(op)
    answer: dict[str, Any] = {
        "job": job,
        "op": op,
        "key": key,
        "key_group": kg,
        "watermark": public_watermark(wm),
        "checkpoint": None,
        "consistency": consistency,
    }
    if isinstance(operator_def, ProcessOperator):
        states = dict(decode_state(value)[0::2] for _, value in rows)
        answer.update(windows=[], state=states)
        return Response(orjson.dumps(answer), media_type="application/json")
    plan = handle.plan(operator_def)
    lateness = operator_def.allowed_lateness_ms
    windows: list[dict[str, Any]] = []
    for start, end, slots in _entries(operator_def, plan, rows, pane_rows):
        if (from_ is not None and start < from_) or (to is not None and start > to):
            continue
        window = plan.result("", start, end, slots, end - 1 + lateness <= wm)
        del window["key"]
        windows.append(window)
    answer["windows"] = windows[-limit:]
    # serialized here: keeps DESIGN's field order and skips re-validating every answer
    return Response(orjson.dumps(answer), media_type="application/json")


def _namespace(skey: bytes) -> int:
    return layout.decode_namespace(skey[-layout.NAMESPACE_BYTES :])


def _entries(
    op: WindowOperator,
    plan: FoldPlan,
    rows: list[tuple[bytes, bytes]],
    pane_rows: list[tuple[bytes, bytes]],
) -> list[tuple[int, int, list[Any]]]:
    """A key's windows as ``(start, end, slots)``, by end: sessions store their start, sliding
    windows that are still open are composed from their panes."""
    assigner = op.assigner
    if isinstance(assigner, SessionWindows):
        sessions = []
        for k, v in rows:
            start, slots = decode_session(v)
            sessions.append((start, _namespace(k), slots))
        return sessions
    stored = {_namespace(k): decode_window(v) for k, v in rows}
    if pane_rows and isinstance(assigner, SlidingWindows):
        panes = {_namespace(k): decode_window(v) for k, v in pane_rows}
        stored = compose_stored(
            assigner.size_ms, assigner.slide_ms, pane_size(assigner), plan.merge, stored, panes
        )
    return [(assigner.start_of(end), end, slots) for end, slots in sorted(stored.items())]
