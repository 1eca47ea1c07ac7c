"""``weir.client``: a Python client of the weir query API.

```python
import os

from weir.client import Client, NotFound, to_pandas

with Client(os.environ["WEIR_URL"], token=os.environ["WEIR_API_TOKEN"]) as weir:
    print(weir.health().status)  # ok
    answer = weir.state("live", "counts", "ad-0", limit=3)  # the API's StateAnswer model
    print(to_pandas(answer)[["start", "n", "final"]])  # needs pandas
    print(sorted(weir.keys("live", "counts")))  # every key, a page at a time
    try:
        weir.state("live", "counts", "no-such-key")
    except NotFound as error:
        print(error.code)  # key_not_found
    for event in weir.stream("live", "counts", "ad-0"):  # each time the answer changes
        print(event.answer.watermark if event.answer else event.error)
        break
```

``AsyncClient`` has the same methods, awaited (its iterators are ``async for``). Answers are
the API's own pydantic models (``weir.api.models``); error answers are raised as
``WeirClientError`` subclasses (``NotFound``, ``NotFreshEnough``, ...: the tree is in
``weir.api.client._exceptions``). A 503 is retried as its ``Retry-After`` says (``Retries``), a
stream reconnects with ``Last-Event-ID`` when the server goes away (``Reconnect``).
"""

from __future__ import annotations

from weir.api.client._async import AsyncClient, AsyncWindowRows
from weir.api.client._calls import (
    LookupMiss,
    StreamEvent,
    to_pandas,
)
from weir.api.client._core import Reconnect, Retries
from weir.api.client._exceptions import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    InvalidURL,
    NotFound,
    NotFreshEnough,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    WeirClientError,
)
from weir.api.client._sync import Client, WindowRows
from weir.api.models import SqlAnswer, WindowKey, WindowKeys

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncWindowRows",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "InvalidURL",
    "LookupMiss",
    "NotFound",
    "NotFreshEnough",
    "Reconnect",
    "Retries",
    "ServerError",
    "SqlAnswer",
    "StreamEvent",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "WeirClientError",
    "WindowKey",
    "WindowKeys",
    "WindowRows",
    "to_pandas",
]
