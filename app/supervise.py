"""Run a job: the job manager (workers) and, unless ``--no-api``, the API server in one
supervised process. ``app/api_process.py`` serves the API from a process of its own."""

from __future__ import annotations

import logging
import resource
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import replace

import uvicorn
from fastapi import FastAPI

from weir.api import ApiSettings, Registry, create_app, handle_for
from weir.api.settings import MAX_CONNECTIONS
from weir.app import http_guard, logs
from weir.app.api_workers import ApiMembers, MemberSpec, listen
from weir.app.http_guard import ConnectionGuard
from weir.engine.errors import ConfigError
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import load_configured_job

log = logging.getLogger(__name__)


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


def raise_fd_limit() -> None:
    """The soft limit on open descriptors up to the hard one: HTTP clients hold descriptors
    in the process that also writes checkpoints, and the soft default (often 1024) would let
    them make a checkpoint fail with "Too many open files"."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit soft=%s hard=%s: %s", soft, hard, exc)


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
    """Serve ``app`` until stopped (SIGINT, SIGTERM) or until ``until`` is set; prints the
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
        http=http_guard.protocol(guard),
    )
    server = uvicorn.Server(config)

    def watch() -> None:
        while not server.started and not until.is_set():
            until.wait(0.05)
        if server.started and announce:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            url = f"http://{host}:{port}"
            logs.say(f"job {job} serving on {url}", job=job, url=url)
            if on_serving is not None:
                on_serving(url)
        until.wait()
        server.should_exit = True

    threading.Thread(target=watch, name="weir-watch", daemon=True).start()
    # uvicorn re-raises the signal that stopped it once it has shut down; SIGTERM's default
    # action would then kill this process before the caller cleans up. Ours does nothing, so
    # a SIGTERM ends the process gracefully (exit 0).
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run(sockets=None if sock is None else [sock])
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(
    cfg: RunConfig,
    api_host: str,
    api_port: int,
    api: ApiSettings | None = None,
    *,
    serve_api: bool = True,
    api_workers: int = 1,
) -> int:
    """Run until stopped (or, with ``exit_at_end``, until the bounded input is processed).
    ``api_workers`` > 1: that many API processes on the port, this one and others that read
    the job as ``weir api`` does (``app.api_workers``)."""
    job = load_configured_job(cfg)
    raise_fd_limit()
    if not serve_api:
        return _run_headless(cfg, job)
    api = replace(api or ApiSettings(), host=api_host)  # the access rule follows the bind
    check_port_free(api_host, api_port)
    warn_if_unguarded(api)
    sock = listen(api_host, api_port, reuse_port=api_workers > 1)
    manager = JobManager(cfg, job)
    registry = Registry()
    registry.add(handle_for(job, manager, cfg))
    manager.start()
    spec = MemberSpec(
        str(cfg.job_file), cfg.state_dir,
        None if cfg.checkpoint_dir is None else str(cfg.checkpoint_dir),
        sock.getsockname()[1], api, cfg.log_level, cfg.log_format,
    )  # fmt: skip
    try:
        with ApiMembers(spec, api_workers - 1):
            app = create_app(registry, api)
            serve_http(
                app,
                api_host,
                api_port,
                job.name,
                manager.done,
                manager.serving_at,
                max_connections=api.max_connections,
                sock=sock,
            )
    finally:
        manager.stop()
    return _outcome(manager, job)


def _run_headless(cfg: RunConfig, job: Job) -> int:
    """The job manager alone: ``weir api`` serves the state from another process."""
    manager = JobManager(cfg, job)
    manager.start()
    logs.say(
        f"job {job.name} running without an API (serve it with: weir api {cfg.job_file} "
        f"--state-dir {cfg.state_dir})",
        job=job.name,
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        while not stop.is_set() and not manager.done.wait(0.1):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        manager.stop()
        signal.signal(signal.SIGTERM, previous)
    return _outcome(manager, job)


def _outcome(manager: JobManager, job: Job) -> int:
    if manager.failure is not None:
        logs.error(f"job {job.name} failed: {manager.failure}", job=job.name)
        return manager.failure.exit_code
    if manager.state() == "cancelled":
        n = manager.last_checkpoint
        then = (
            "it completed no checkpoint in this run"
            if n is None
            else f"weir run --restore latest resumes from checkpoint {n}"
        )
        logs.say(f"job {job.name} cancelled; {then}", job=job.name, checkpoint=n)
    return 0
