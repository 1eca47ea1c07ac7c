"""An ASGI app served by uvicorn on a free loopback port in a thread, for tests of HTTP clients
against a real server (``with served(app) as url: ...``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from tests.support import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def served(app: Any, **config: Any) -> Iterator[str]:
    """Serves ``app`` on 127.0.0.1 until the block ends; yields its base URL."""
    port = free_port()
    options: dict[str, Any] = {"log_level": "warning", "log_config": None, **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    thread = threading.Thread(target=server.run, name="stub-http", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10.0, what="the stub server to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
