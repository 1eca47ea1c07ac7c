"""``GET /{job}/{op}/broadcast``: a keyed broadcast operator's broadcast states.

Every worker holds the same copy (``engine/runtime/operators/broadcast_state.py``), under a
prefix of its RocksDB outside every key group; the answer reads worker 0's, the owner of key
group 0, live or as of the latest checkpoint, like a key's state."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import msgpack
from fastapi import APIRouter, Depends, Request, Response

from weir.api.deps import (
    Consistency,
    Freshness,
    freshness,
    job_handle,
    operator,
    public_watermark,
    registry,
    wait_fresh,
)
from weir.api.errors import ErrorBody, not_found
from weir.api.models import BroadcastAnswer
from weir.api.registry import JobHandle, Registry
from weir.api.routes.state import NOT_FRESH, json_response
from weir.api.statesource import StateSource
from weir.engine.nodes import KeyedBroadcastNode
from weir.state import layout

router = APIRouter(tags=["state"])


def broadcast_answer(
    handle: JobHandle, op_def: KeyedBroadcastNode, consistency: str
) -> dict[str, Any]:
    source = StateSource(handle, consistency)
    prefix = layout.broadcast_prefix(op_def.state_id)
    states: dict[str, list[list[Any]]] = {}
    for raw, value in source.scan(0, prefix):  # key group 0: worker 0's copy
        _, name, key = layout.decode_broadcast_key(raw)
        entry = [msgpack.unpackb(key), msgpack.unpackb(value, strict_map_key=False)]
        states.setdefault(name, []).append(entry)
    watermark, checkpoint = source.as_of(op_def.name)
    return {
        "job": handle.job.name,
        "op": op_def.name,
        "watermark": public_watermark(watermark),
        "checkpoint": checkpoint,
        "consistency": consistency,
        "states": states,
    }


@router.get(
    "/{job}/{op}/broadcast",
    operation_id="get_broadcast_state",
    response_model=BroadcastAnswer,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, **NOT_FRESH},
)
async def get_broadcast_state(
    job: str,
    op: str,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    fresh: Annotated[Freshness, Depends(freshness)],
    consistency: Consistency = "live",
) -> Response:
    """``{"job","op","watermark","checkpoint","consistency","states":{name:[[key,value]]}}``:
    the operator's broadcast states, every worker's copy being the same."""
    handle = job_handle(reg, job)
    op_def = operator(handle, op)
    if not isinstance(op_def, KeyedBroadcastNode):
        raise not_found(
            "broadcast_state_not_found",
            f"operator {op!r} of job {job!r} has no broadcast state (it is a "
            f"{op_def.describe()['type']} operator); broadcast state belongs to operators "
            "made with keyed.connect(stream.broadcast(...)).process(...)",
        )
    await wait_fresh(fresh, handle, op, consistency)
    body = await anyio.to_thread.run_sync(broadcast_answer, handle, op_def, consistency)
    return json_response(body, request)
