"""``POST /auth/stream-token``: a short-lived token that opens event streams from a page
(``api.streamtoken``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from weir.api.errors import ApiError, ErrorBody
from weir.api.streamtoken import DEFAULT_TTL_S, MAX_TTL_S, PARAM, StreamKeys

router = APIRouter(tags=["auth"])


class StreamToken(BaseModel):
    token: str
    expires_at: int  # epoch ms


@router.post(
    "/auth/stream-token",
    response_model=StreamToken,
    responses={400: {"model": ErrorBody}, 401: {"model": ErrorBody}},
)
def stream_token(
    request: Request,
    job: Annotated[
        str | None, Query(description="open only this job's streams (default: every job's)")
    ] = None,
    ttl_s: Annotated[int, Query(ge=1, le=MAX_TTL_S, description="lifetime, seconds")] = (
        DEFAULT_TTL_S
    ),
    reads: Annotated[
        bool,
        Query(
            description="also open every read route (GET), sent as 'Authorization: Bearer "
            "<token>': what the dashboard keeps instead of the API token"
        ),
    ] = False,
) -> StreamToken:
    """A token that opens the ``/stream`` routes (of ``job`` only, when given) as
    ``?access_token=<token>`` until ``expires_at``: for a browser's ``EventSource``, which
    cannot send ``Authorization``. A stream already open when the token expires goes on; a
    reconnect needs a new token. With ``reads=true`` it opens the read routes too, never an
    admin route nor this one."""
    keys: StreamKeys | None = request.app.state.stream_keys
    if keys is None:
        raise ApiError(
            400,
            "no_token_needed",
            "this API runs without WEIR_API_TOKEN, so its streams open without a token; "
            f"open them without {PARAM}",
        )
    token, expires = keys.issue(job, ttl_s, reads=reads)
    return StreamToken(token=token, expires_at=expires)
