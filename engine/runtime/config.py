"""What a run of a job is configured with (built by ``app.cli`` from flags and WEIR_* vars)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RunConfig:
    job_file: Path
    state_dir: Path = Path(".weir")
    source_url: str | None = None
    sink_url: str | None = None
    dead_letter_url: str | None = None
    late_sink_url: str | None = None
    parallelism: int = 1
    exit_at_end: bool = False
    state_retention_ms: int = 3_600_000
    flush_interval_ms: int = 100
    batch_size: int = 8192
    status_interval_ms: int = 100
    buffer_timeout_ms: int = 10
    idle_timeout_ms: int | None = None
    log_level: str = "INFO"
    run_id: str = field(default_factory=lambda: f"{os.getpid()}-{time.time_ns() % 10**12}")

    def __post_init__(self) -> None:
        checks = [
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
                "--buffer-timeout-ms",
                self.buffer_timeout_ms,
                self.buffer_timeout_ms >= 0,
                "use 0 or more milliseconds",
            ),
        ]
        for flag, value, ok, fix in checks:
            if not ok:
                raise ConfigError(f"{flag}={value} is not valid; {fix}")

    def job_dir(self, job: str) -> Path:
        return self.state_dir / job

    def exchange_namespace(self, job: str) -> str:
        """Names this run's worker sockets, so two runs never meet."""
        return f"{job}-{self.run_id}"

    def worker_state_path(self, job: str, index: int) -> Path:
        return self.job_dir(job) / f"worker-{index}" / "db"
