"""``weir api``: the HTTP API of a job that ``weir run`` runs, from a process of its own.

It reads the workers' RocksDB as secondary instances and the checkpoints from storage, like the
API inside ``weir run``, and the job manager's status from the file it publishes, in the state
directory of the job manager that holds the job's lease (``api.leader``: it follows a
failover); savepoints and live backfills go to the job manager over its control channel
(``api.remote``). Killing it
(even ``kill -9``) costs the job nothing, and a new one picks up where it was. Its own files (the
secondary instances' and committed views') are in ``<state-dir>/<job>/api-<pid>``; those of
processes that are gone are removed at start. ``--workers N`` serves from N such processes
on one port (``app.api_workers``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import threading
from multiprocessing.connection import wait
from pathlib import Path

from weir.api import ApiSettings, Registry, create_app, handle_for
from weir.api.leader import LeaderWatch
from weir.api.remote import RemoteRuntime
from weir.app.api_workers import ApiMembers, MemberSpec
from weir.app.fdlimit import raise_fd_limit
from weir.app.httpserve import check_port_free, listen, serve_http, warn_if_unguarded
from weir.app.interrupt import CTRL_C
from weir.base import logs
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.loader import load_job
from weir.state.checkpoints import CheckpointStorage

log = logging.getLogger(__name__)


def run(
    job_file: Path | str,
    state_dir: Path,
    checkpoint_dir: str | None,
    port: int,
    settings: ApiSettings,
    workers: int = 1,
    log_spec: tuple[str, str] = ("INFO", "text"),
) -> int:
    """Serves until stopped; with ``workers`` > 1, from that many processes on one port
    (``app.api_workers``; ``log_spec``, level and format, configures their logging)."""
    job = load_job(job_file)
    cfg = RunConfig(job_file=job_file, state_dir=state_dir, checkpoint_dir=checkpoint_dir)
    check_port_free(settings.host, port)
    warn_if_unguarded(settings)
    raise_fd_limit()
    sock = listen(settings.host, port, reuse_port=workers > 1)
    spec = MemberSpec(
        str(job_file), state_dir, checkpoint_dir, sock.getsockname()[1], settings, *log_spec
    )
    until = threading.Event()
    with (
        ApiMembers(spec, workers - 1, member_main),
        CTRL_C.doing(f"the API of job {job.name}", until.set),
    ):
        _serve(job, cfg, sock, settings, until, announce=True)
    return 0


def member_main(spec: MemberSpec) -> None:
    """A member process: serves until SIGTERM or until its parent is gone. Ctrl-C reaches the
    whole process group; the parent stops its members in order, so a member ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.configure(spec.log_level, spec.log_format)
    until = threading.Event()
    parent = multiprocessing.parent_process()
    if parent is not None:

        def orphaned() -> None:
            wait([parent.sentinel])
            log.warning("api member pid=%d: its parent is gone; stopping", os.getpid())
            until.set()

        threading.Thread(target=orphaned, name="weir-parent-watch", daemon=True).start()
    serve_member(spec, until)


def serve_member(spec: MemberSpec, until: threading.Event) -> None:
    """One more process of ``weir api --workers N`` (or ``weir run --api-workers N``)."""
    job = load_job(spec.job_file)
    cfg = RunConfig(
        job_file=spec.job_file, state_dir=spec.state_dir, checkpoint_dir=spec.checkpoint_dir
    )
    raise_fd_limit()
    sock = listen(spec.settings.host, spec.port, reuse_port=True)
    _serve(job, cfg, sock, spec.settings, until, announce=False)


def _serve(
    job: Job,
    cfg: RunConfig,
    sock: socket.socket,
    settings: ApiSettings,
    until: threading.Event,
    *,
    announce: bool,
) -> None:
    job_dir = cfg.job_dir(job.name)
    _remove_stale_api_dirs(job_dir)
    api_dir = job_dir / f"api-{os.getpid()}"
    storage = CheckpointStorage(cfg.checkpoints_root, job.name)
    leader = LeaderWatch(storage).start()  # the job manager may fail over: follow its lease
    runtime = RemoteRuntime(job, job_dir, storage, leader=leader)
    registry = Registry()
    registry.add(handle_for(job, runtime, cfg, api_dir))
    if runtime.status_problem:
        log.warning("job=%s %s", job.name, runtime.status_problem)
    try:
        app = create_app(registry, settings)
        serve_http(
            app,
            settings.host,
            sock.getsockname()[1],
            job.name,
            until,
            max_connections=settings.max_connections,
            sock=sock,
            announce=announce,
        )
    finally:
        leader.close()
        shutil.rmtree(api_dir, ignore_errors=True)


def _remove_stale_api_dirs(job_dir: Path) -> None:
    """``api-<pid>`` directories of API processes that are gone (a kill -9 leaves them)."""
    for d in job_dir.glob("api-*"):
        pid = d.name.removeprefix("api-")
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
