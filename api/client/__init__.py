"""``weir.client``: a Python client of the weir query API.

    from weir.client import Client

    with Client("http://127.0.0.1:8000", token="...") as weir:
        answer = weir.state("clicks", "counts", "ad-1", min_watermark=t)
        for event in weir.stream("clicks", "counts", "ad-1"):
            print(event.answer)

``AsyncClient`` has the same methods, awaited. Answers are the API's own pydantic models
(``weir.api.models``); error answers are raised as ``WeirClientError`` subclasses
(``NotFound``, ``NotFreshEnough``, ...), see ``weir.api.client._exceptions``.
"""

from __future__ import annotations

from weir.api.client._async import AsyncClient, AsyncWindowRows
from weir.api.client._calls import (
    LookupMiss,
    StreamEvent,
    WindowKeyRow,
    WindowKeys,
    to_pandas,
)
from weir.api.client._core import Reconnect, Retries
from weir.api.client._exceptions import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    NotFreshEnough,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    WeirClientError,
)
from weir.api.client._sync import Client, WindowRows

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncWindowRows",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "LookupMiss",
    "NotFound",
    "NotFreshEnough",
    "Reconnect",
    "Retries",
    "ServerError",
    "StreamEvent",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "WeirClientError",
    "WindowKeyRow",
    "WindowKeys",
    "WindowRows",
    "to_pandas",
]
