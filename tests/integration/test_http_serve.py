"""``serve_http``'s watcher announces the API once it listens, then stops the server when
``until`` is set (the job ended with ``--exit-at-end``, it failed, Ctrl-C). An error while
announcing (``on_serving`` raising, stderr a closed pipe) ended the watcher before it waited:
the server then never stopped, and ``weir run`` served on after its job had ended."""

from __future__ import annotations

import threading

import httpx
from fastapi import FastAPI

from tests.support import wait_until
from weir.app.httpserve import serve_http


def test_the_server_stops_on_time_though_announcing_it_failed() -> None:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    until = threading.Event()
    urls: list[str] = []

    def on_serving(url: str) -> None:
        urls.append(url)
        raise BrokenPipeError(32, "Broken pipe")

    thread = threading.Thread(
        target=serve_http, args=(app, "127.0.0.1", 0, "t1", until, on_serving), daemon=True
    )
    thread.start()
    try:
        wait_until(lambda: urls, 20.0, what="the server to listen")
        assert httpx.get(f"{urls[0]}/ping", trust_env=False).json() == {"ok": True}
    finally:
        until.set()
        thread.join(20.0)
    assert not thread.is_alive(), "the server went on serving after until was set"
