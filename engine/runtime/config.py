"""What a run of a job is configured with: ``RunConfig``, the user's settings (declared in
``runtime.settings``, from which ``weir run``'s flags are made), and ``RunFacts``, what the run
itself decides as it goes (its id, the checkpoint a restart restores, a cluster task's host).

The job manager hands both to every worker; only ``RunConfig`` comes from the user.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from weir.base.errors import ConfigError
from weir.base.settings import judge, named
from weir.engine.runtime.settings import BY_NAME

__all__ = ["WORKERS_LOCK", "RunConfig", "RunFacts"]

WORKERS_LOCK = "workers.lock"


def _default(name: str) -> Any:
    return BY_NAME[name].default


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The settings of a run of ``job_file``; each field but ``job_file`` is declared, with its
    default, check and flag, in ``runtime.settings.RUN_SETTINGS``.

    Raises:
        ConfigError: a field is outside what its declaration accepts, or two fields disagree;
            the message names the setting (```parallelism```), which the command line shows
            as its flag.

    Example:
        >>> RunConfig(job_file="jobs/ads.py", parallelism=2).checkpoints_root
        PosixPath('.weir/checkpoints')
    """

    # the job as given to `weir run`: a .py file, or `package.module:attr` (loader.load_job);
    # each worker loads it again from this
    job_file: Path | str
    state_dir: Path = Path(_default("state_dir"))
    source_url: str | None = None
    sink_url: str | None = None
    dead_letter_url: str | None = None
    late_sink_url: str | None = None
    parallelism: int = _default("parallelism")
    exit_at_end: bool = _default("exit_at_end")
    state_retention_ms: int = _default("state_retention_ms")
    flush_interval_ms: int = _default("flush_interval_ms")
    batch_size: int = _default("batch_size")
    buffer_timeout_ms: int = _default("buffer_timeout_ms")
    idle_timeout_ms: int | None = None
    log_level: str = _default("log_level")
    log_format: str = _default("log_format")
    # a directory or s3://BUCKET/PREFIX (state/objectstore.py); default: <state-dir>/checkpoints
    checkpoint_dir: str | Path | None = None
    checkpoint_interval_ms: int = _default("checkpoint_interval_ms")
    checkpoint_timeout_ms: int = _default("checkpoint_timeout_ms")
    checkpoints_retained: int = _default("checkpoints_retained")
    restore: str | None = None  # "auto", "latest", a chk-<n> directory or its URL
    fresh: bool = _default("fresh")
    lease_ms: int = _default("lease_ms")
    # at most this many restarts within restart_interval_ms (None: 3 with checkpoints, else 0);
    # restart_attempts is its old name, kept as an alias
    restart_failures: int | None = None
    restart_attempts: int | None = None
    restart_interval_ms: int = _default("restart_interval_ms")
    restart_delay_ms: int = _default("restart_delay_ms")
    max_future_ms: int = _default("max_future_ms")
    # the share of records read that may go to the dead letters (None: no limit), judged once
    # dead_letter_min_records were read, or at the end of a bounded input
    max_dead_letter_ratio: float | None = None
    dead_letter_min_records: int = _default("dead_letter_min_records")
    # live backfills load SST files only from under here: a directory or s3://BUCKET/PREFIX
    backfill_dir: Path | str = Path(_default("backfill_dir"))
    exchange_transport: str = _default("exchange_transport")
    # cluster mode: the Spark master the workers run on as one barrier stage, its extra
    # settings, and the address tasks reach this process at (None: SPARK_LOCAL_IP or 127.0.0.1)
    master: str | None = None
    spark_conf: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold secrets
    driver_host: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in BY_NAME:
                judge(BY_NAME[f.name], getattr(self, f.name))
        if self.master is not None and self.checkpoint_dir is None:
            raise ConfigError(
                f"{named('master')}={self.master} runs the workers on other hosts, and a "
                "restart restores them from checkpoint storage they all reach: give "
                f"{named('checkpoint_dir')} s3://BUCKET/PREFIX (or a directory every executor "
                "mounts)"
            )
        if self.fresh and self.restore:
            raise ConfigError(
                f"{named('fresh')} starts from empty state and {named('restore')}="
                f"{self.restore} from a checkpoint: give one of them"
            )
        both = (self.restart_failures, self.restart_attempts)
        if None not in both and both[0] != both[1]:
            raise ConfigError(
                f"{named('restart_attempts')}={self.restart_attempts} and "
                f"{named('restart_failures')}={self.restart_failures} disagree; "
                f"{named('restart_attempts')} is the old name of {named('restart_failures')} "
                f"(restarts within {named('restart_interval_ms')}): give only that"
            )

    @property
    def checkpoints_root(self) -> str | Path:
        return (
            self.checkpoint_dir
            if self.checkpoint_dir is not None
            else self.state_dir / "checkpoints"
        )

    @property
    def max_restarts(self) -> int:
        """Restarts allowed within ``restart_interval_ms``."""
        for given in (self.restart_failures, self.restart_attempts):
            if given is not None:
                return given
        return 3 if self.checkpoint_interval_ms > 0 else 0

    def job_dir(self, job: str) -> Path:
        return self.state_dir / job

    def sst_cache_path(self, job: str) -> Path:
        """Local copies of SST files in remote checkpoint storage, shared by the job's workers
        on this host (names are unique per run and worker): a recovery links instead of
        downloading what is here."""
        return self.job_dir(job) / "sst-cache"

    def worker_state_path(self, job: str, index: int) -> Path:
        return self.job_dir(job) / f"worker-{index}" / "db"

    def workers_lock(self, job: str) -> Path:
        """Every local worker of the job holds a shared lock on this file while it lives: a
        new job manager waits until nobody does before it touches state or outputs."""
        return self.job_dir(job) / WORKERS_LOCK


def _run_id() -> str:
    return f"{os.getpid()}-{time.time_ns() % 10**12}"


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What a run decides as it goes, never a user's setting.

    Attributes:
        run_id: this run's id (the job manager's; each attempt's workers get
            ``<run_id>-<generation>``), in file names that must not collide across runs.
        restore_from: the resolved checkpoint (path or URL) the workers of this attempt
            restore; ``None``: empty state.
        worker_host: set by a cluster task for its worker: the host it binds and is known by.
        serve_state: the worker serves its live state to the job manager (a cluster task:
            ``task.stateserver``).
        status_interval_ms: how often a worker reports its status to the job manager.
    """

    run_id: str = field(default_factory=_run_id)
    restore_from: str | None = None
    worker_host: str | None = None
    serve_state: bool = False
    status_interval_ms: int = 100
