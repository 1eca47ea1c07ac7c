"""Serving the API over HTTP: the port checks, the listening socket (shared by the processes of
``--api-workers``/``--workers``) and uvicorn's run until stopped. Used by ``weir run``
(``supervise.py``) and ``weir api`` (``api_process.py``) alike."""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator

import uvicorn
from fastapi import FastAPI

from weir.api.settings import MAX_CONNECTIONS, ApiSettings
from weir.app import http_guard
from weir.app.http_guard import ConnectionGuard
from weir.base import logs
from weir.base.errors import ConfigError

log = logging.getLogger(__name__)

BACKLOG = 2048  # uvicorn's own


def check_port_free(host: str, port: int) -> None:
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"--api-port {port} on {host} is not available ({exc.strerror}); pass another "
                "port, or 0 for any free one"
            ) from None


def warn_if_unguarded(api: ApiSettings) -> None:
    if not api.guarded:
        log.warning(
            "the API binds %s, which other machines can reach, without a token: it serves "
            "only /health and refuses every other route; set WEIR_API_TOKEN, or bind 127.0.0.1",
            api.host,
        )


def serve_http(
    app: FastAPI,
    host: str,
    port: int,
    job: str,
    until: threading.Event,
    on_serving: Callable[[str], None] | None = None,
    max_connections: int | None = None,
    sock: socket.socket | None = None,
    announce: bool = True,
) -> None:
    """Serve ``app`` until SIGTERM or until ``until`` is set (Ctrl-C sets it); prints the
    ``weir: job <name> serving on <url>`` line once listening (unless not ``announce``: a
    member of ``app.api_workers``), and hands ``on_serving`` the URL. ``sock``: a listening
    socket to serve instead of binding ``host:port``. At most ``max_connections`` connections
    wait on their clients at once (``http_guard``: past it the one waiting longest is closed)."""
    # log_config=None: uvicorn's records go through weir's handler (and --log-format) too;
    # uvicorn.access logs at INFO, below the level set here, so its access log is off outright.
    # No limit_concurrency: it counted idle and half-sent connections, so holding them made
    # every request a 503; the guard's deadlines and oldest-first rule replace it
    guard = ConnectionGuard(max_connections or MAX_CONNECTIONS)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,
        access_log=False,
        http=http_guard.protocol(guard, direct=getattr(app.state, "direct", None)),
    )
    server = _Server(config)

    def watch() -> None:
        try:
            while not server.started and not until.is_set():
                until.wait(0.05)
            if server.started and announce:
                host, port = server.servers[0].sockets[0].getsockname()[:2]
                url = f"http://{host}:{port}"
                logs.say(f"job {job} serving on {url}", job=job, url=url)
                if on_serving is not None:
                    on_serving(url)
            if server.started:  # listening already: the collection delays no start, no bind
                settle_collector()
        except Exception:  # noqa: BLE001 - e.g. stderr a closed pipe: serve on, stop on time
            log.exception("job=%s announcing the API failed", job)
        finally:  # whatever the announcement did, ``until`` still stops the server
            until.wait()
            server.should_exit = True

    threading.Thread(target=watch, name="weir-watch", daemon=True).start()
    server.run(sockets=None if sock is None else [sock])


def settle_collector() -> None:
    """Once listening: one full collection, then everything alive is frozen (CPython's
    ``gc.freeze``), so the collector's full passes while requests are served walk only what
    was made before, not the job, the app and the imported modules. Such a pass stopped the
    event loop for up to 77 ms, every request waiting on it (the point lookups' p99). Not
    before ``server.run``: the collection then delayed the bind, and a short job run with
    ``--exit-at-end`` could end before its API had said where it serves."""
    gc.collect()
    gc.freeze()


class _Server(uvicorn.Server):
    """uvicorn's server, taking SIGTERM only: a graceful shutdown, then the caller cleans up
    and exits 0 (uvicorn would re-raise the signal, whose default action kills the process
    first). Ctrl-C is the command's (``app.interrupt``): it sets ``until``."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGTERM, self.handle_exit)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)


def listen(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port), shared with processes that
    bind the same address with ``reuse_port``."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"--api-port {port} on {host} is not available ({exc.strerror}); pass another "
            "port, or 0 for any free one"
        ) from None
    return sock
