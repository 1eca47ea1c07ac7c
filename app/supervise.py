"""Run a job: the job manager (workers) and the API server in one supervised process."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading

import uvicorn

from api import ApiSettings, Registry, create_app, handle_for
from engine.errors import ConfigError
from engine.runtime.config import RunConfig
from engine.runtime.jobmanager import JobManager
from engine.runtime.loader import load_configured_job

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


def run(cfg: RunConfig, api_host: str, api_port: int, api: ApiSettings | None = None) -> int:
    """Run until stopped (or, with ``exit_at_end``, until the bounded input is processed)."""
    job = load_configured_job(cfg)
    check_port_free(api_host, api_port)
    manager = JobManager(cfg, job)
    registry = Registry()
    registry.add(handle_for(job, manager, cfg))
    server = uvicorn.Server(
        uvicorn.Config(create_app(registry, api), host=api_host, port=api_port, log_level="warning")
    )

    def watch() -> None:
        while not server.started and not manager.done.is_set():
            manager.done.wait(0.05)
        if server.started:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            print(
                f"weir: job {job.name} serving on http://{host}:{port}", file=sys.stderr, flush=True
            )
        manager.done.wait()
        server.should_exit = True

    manager.start()
    threading.Thread(target=watch, name="weir-watch", daemon=True).start()
    # uvicorn re-raises the signal that stopped it once it has shut down; SIGTERM's default
    # action would then kill this process before the workers are stopped. Ours does nothing,
    # so the stop below runs and a SIGTERM ends the job gracefully (exit 0).
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run()
    finally:
        manager.stop()
        signal.signal(signal.SIGTERM, previous)
    if manager.failure is not None:
        print(f"weir: error: job {job.name} failed: {manager.failure}", file=sys.stderr)
        return 1
    return 0
