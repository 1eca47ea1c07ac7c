"""What a run of a job is configured with (built by ``app.cli`` from flags and WEIR_* vars)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from weir.engine.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RunConfig:
    # the job as given to `weir run`: a .py file, or `package.module:attr` (loader.load_job);
    # each worker loads it again from this
    job_file: Path | str
    state_dir: Path = Path(".weir")
    source_url: str | None = None
    sink_url: str | None = None
    dead_letter_url: str | None = None
    late_sink_url: str | None = None
    parallelism: int = 1
    exit_at_end: bool = False
    state_retention_ms: int = 3_600_000
    flush_interval_ms: int = 50  # as weir run's --flush-interval-ms
    batch_size: int = 1024  # as weir run's --batch-size (app/options.py says why this size)
    status_interval_ms: int = 100
    buffer_timeout_ms: int = 10
    idle_timeout_ms: int | None = None
    log_level: str = "INFO"
    log_format: str = "text"  # or "json" (app/logs.py), in the workers too
    # a directory or s3://BUCKET/PREFIX (state/objectstore.py); default: <state-dir>/checkpoints
    checkpoint_dir: str | Path | None = None
    checkpoint_interval_ms: int = 0  # 0: no periodic checkpoints
    checkpoint_timeout_ms: int = 60_000
    checkpoints_retained: int = 3
    restore: str | None = None  # "latest" or a chk-<n> directory, from --restore
    restore_from: str | None = None  # the resolved checkpoint (path or URL) the workers restore
    # at most this many restarts within restart_interval_ms (None: 3 with checkpoints, else 0);
    # restart_attempts is its old name, kept as an alias
    restart_failures: int | None = None
    restart_attempts: int | None = None
    restart_interval_ms: int = 600_000
    restart_delay_ms: int = 1000
    max_future_ms: int = 86_400_000  # event times further ahead of the wall clock are refused
    # live backfills load SST files only from under here: a directory or s3://BUCKET/PREFIX
    backfill_dir: Path | str = Path(".weir/backfill")
    # how workers reach each other: "unix" (a 0700 directory per worker) or "tcp" (127.0.0.1)
    exchange_transport: str = "unix"
    # cluster mode (``--master``): the Spark master the workers run on as one barrier stage, its
    # extra settings, and the address tasks reach this process at (None: SPARK_LOCAL_IP or
    # 127.0.0.1)
    master: str | None = None
    spark_conf: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold secrets
    driver_host: str | None = None
    # set by a cluster task for its worker: the host it binds and is known by, and that it
    # serves its live state to the job manager (``task.stateserver``)
    worker_host: str | None = None
    serve_state: bool = False
    run_id: str = field(default_factory=lambda: f"{os.getpid()}-{time.time_ns() % 10**12}")

    def __post_init__(self) -> None:
        checks: list[tuple[str, object, bool, str]] = [
            ("--parallelism", self.parallelism, self.parallelism >= 1, "use 1 or more"),
            (
                "--state-retention-ms",
                self.state_retention_ms,
                self.state_retention_ms >= 0,
                "use 0 or more milliseconds",
            ),
            (
                "--flush-interval-ms",
                self.flush_interval_ms,
                self.flush_interval_ms >= 0,
                "use 0 or more milliseconds",
            ),
            ("--batch-size", self.batch_size, self.batch_size >= 1, "use 1 or more records"),
            (
                "--checkpoint-interval-ms",
                self.checkpoint_interval_ms,
                self.checkpoint_interval_ms >= 0,
                "use 0 (no checkpoints) or more milliseconds",
            ),
            (
                "--checkpoint-timeout-ms",
                self.checkpoint_timeout_ms,
                self.checkpoint_timeout_ms > 0,
                "use 1 or more milliseconds",
            ),
            (
                "--checkpoints-retained",
                self.checkpoints_retained,
                self.checkpoints_retained >= 1,
                "keep 1 or more checkpoints",
            ),
            (
                "--restart-attempts",
                self.restart_attempts,
                self.restart_attempts is None or self.restart_attempts >= 0,
                "use 0 (never restart) or more",
            ),
            (
                "--restart-failures",
                self.restart_failures,
                self.restart_failures is None or self.restart_failures >= 0,
                "use 0 (never restart) or more",
            ),
            (
                "--restart-interval-ms",
                self.restart_interval_ms,
                self.restart_interval_ms > 0,
                "use 1 or more milliseconds",
            ),
            (
                "--max-future-ms",
                self.max_future_ms,
                self.max_future_ms >= 0,
                "use 0 (no limit) or more milliseconds",
            ),
            (
                "--restart-delay-ms",
                self.restart_delay_ms,
                self.restart_delay_ms >= 0,
                "use 0 or more milliseconds",
            ),
            (
                "--buffer-timeout-ms",
                self.buffer_timeout_ms,
                self.buffer_timeout_ms >= 0,
                "use 0 or more milliseconds",
            ),
        ]
        checks.append(
            (
                "--exchange-transport",
                self.exchange_transport,
                self.exchange_transport in ("unix", "tcp"),
                "use unix or tcp",
            )
        )
        if self.master is not None and self.checkpoint_dir is None:
            raise ConfigError(
                f"--master={self.master} runs the workers on other hosts, and a restart restores "
                "them from checkpoint storage they all reach: give --checkpoint-dir "
                "s3://BUCKET/PREFIX (or a directory every executor mounts)"
            )
        for flag, value, ok, fix in checks:
            if not ok:
                raise ConfigError(f"{flag}={value} is not valid; {fix}")
        both = (self.restart_failures, self.restart_attempts)
        if None not in both and both[0] != both[1]:
            raise ConfigError(
                f"--restart-attempts={self.restart_attempts} and --restart-failures="
                f"{self.restart_failures} disagree; --restart-attempts is the old name of "
                "--restart-failures (restarts within --restart-interval-ms): give only that"
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
