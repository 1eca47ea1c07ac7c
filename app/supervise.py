"""Run a job: the job manager (workers) and, unless ``--no-api``, the API server in one
supervised process. ``app/api_process.py`` serves the API from a process of its own."""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from weir.app.catalogue import flag_names
from weir.app.fdlimit import raise_fd_limit
from weir.app.interrupt import CTRL_C
from weir.app.startup import collector_paused
from weir.base import logs
from weir.base.settings import read_env, render
from weir.engine.job import Job
from weir.engine.runtime import heap
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control import zygote
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import (
    check_inputs,
    load_configured_job,
    plan_is_shareable,
    preload,
)
from weir.engine.runtime.operators.factory import load_every_runtime, load_runtimes
from weir.engine.runtime.settings import WORKER_START
from weir.engine.runtime.task.graph import graph_of

if TYPE_CHECKING:
    from weir.api import ApiSettings

log = logging.getLogger(__name__)


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
    raise_fd_limit()  # before the zygote: its workers keep the limit it had
    try:
        with collector_paused():
            job = _load_and_fork(cfg)
        heap.trim_in_background()  # a long-running process: give freed heap back to the OS
        return _run_loaded(cfg, job, api_host, api_port, api, serve_api, api_workers)
    finally:
        zygote.stop()


def _load_and_fork(cfg: RunConfig) -> Job:
    """Load the job, and fork the workers' zygote (``control.zygote``) while no thread runs:
    after planning a SQL job whose plan runs no user code (its workers share the plan),
    before loading any other job (each worker runs its file, as a spawned one did)."""
    if read_env(WORKER_START) != "zygote" or cfg.master is not None:  # (a cluster's workers)
        return load_configured_job(cfg)
    if plan_is_shareable(cfg):
        job = load_configured_job(cfg)
        zygote.start(lambda: _preload(cfg, job))
        return job
    _preload_for_a_job_file()
    zygote.start()
    return load_configured_job(cfg)


def _preload_for_a_job_file() -> None:
    """Before the zygote's fork, for a job file that each worker loads after it: whatever the
    file may use, as every run imported it when ``weir.engine`` loaded it all (what loads on
    first use would otherwise be every worker's to pay)."""
    # the submodules themselves: sources.kafka and the like are the package's functions
    import weir.engine.cep
    import weir.engine.evictors
    import weir.engine.joins
    import weir.engine.sinks.kafka
    import weir.engine.sources.generator
    import weir.engine.sources.kafka  # noqa: F401

    load_every_runtime()


def _preload(cfg: RunConfig, job: Job) -> None:
    """In the zygote: the plan its workers take, and the runtimes of its operators (their
    modules load on first use, which in a worker would be every worker's to pay)."""
    preload(cfg, job)
    load_runtimes(graph_of(job).keyby)


def _run_loaded(
    cfg: RunConfig,
    job: Job,
    api_host: str,
    api_port: int,
    api: ApiSettings | None,
    serve_api: bool,
    api_workers: int,
) -> int:
    check_inputs(job)  # a missing file is a usage error now, not a worker's failure later
    if not serve_api:
        return _run_headless(cfg, job)
    # the API's stack (fastapi, uvicorn): a run without the API never imports it (about 0.5
    # CPU-s of its start-up, issue 38)
    from weir.api import ApiSettings, Registry, create_app, handle_for
    from weir.app.api_process import member_main
    from weir.app.api_workers import ApiMembers, MemberSpec
    from weir.app.httpserve import check_port_free, listen, serve_http, warn_if_unguarded

    api = replace(api or ApiSettings(), host=api_host)  # the access rule follows the bind
    check_port_free(api_host, api_port)
    warn_if_unguarded(api)
    sock = listen(api_host, api_port, reuse_port=api_workers > 1)
    manager = JobManager(cfg, job)
    registry = Registry()
    registry.add(handle_for(job, manager, cfg))
    stop = _stop_when(manager.done)
    manager.start()
    spec = MemberSpec(
        str(cfg.job_file), cfg.state_dir,
        None if cfg.checkpoint_dir is None else str(cfg.checkpoint_dir),
        sock.getsockname()[1], api, cfg.log_level, cfg.log_format,
    )  # fmt: skip
    try:
        with (
            ApiMembers(spec, api_workers - 1, member_main),
            CTRL_C.doing(f"job {job.name}", stop.set),
        ):
            app = create_app(registry, api)
            serve_http(
                app,
                api_host,
                api_port,
                job.name,
                stop,
                manager.serving_at,
                max_connections=api.max_connections,
                sock=sock,
            )
    finally:
        manager.stop()
    return _outcome(manager, job)


def _stop_when(done: threading.Event) -> threading.Event:
    """An event set when ``done`` is (the job ended) or by Ctrl-C (``app.interrupt``)."""
    stop = threading.Event()

    def follow() -> None:
        done.wait()
        stop.set()

    threading.Thread(target=follow, name="weir-job-done", daemon=True).start()
    return stop


def _run_headless(cfg: RunConfig, job: Job) -> int:
    """The job manager alone: ``weir api`` serves the state from another process."""
    manager = JobManager(cfg, job)
    stop = threading.Event()
    # before the workers start: a SIGTERM from then on stops the job in order
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        manager.start()
    except BaseException:
        signal.signal(signal.SIGTERM, previous)
        raise
    logs.say(
        f"job {job.name} running without an API (serve it with: weir api {cfg.job_file} "
        f"--state-dir {cfg.state_dir})",
        job=job.name,
    )
    try:
        with CTRL_C.doing(f"job {job.name}", stop.set):
            while not stop.is_set() and not manager.done.wait(0.1):
                pass
    finally:
        manager.stop()
        signal.signal(signal.SIGTERM, previous)
    return _outcome(manager, job)


def _outcome(manager: JobManager, job: Job) -> int:
    if manager.failure is not None:
        # the failure names settings (`max_dead_letter_ratio`); here they are this command's flags
        reason = render(str(manager.failure), flag_names("run"))
        logs.error(f"job {job.name} failed: {reason}", job=job.name)
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
