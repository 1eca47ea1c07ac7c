"""The job manager's monitor (the thread that reads the workers' messages, restarts failed
workers and ticks checkpoints) never dies quietly. A restart that cannot start its processes
(out of descriptors or processes: ``OSError``) killed that thread: the job then neither
restarted nor stopped, ``done`` was never set, and ``weir run`` waited for ever with a
traceback on stderr as the only sign. Now the job fails and says why."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control import jobmanager
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import load_configured_job


def test_a_restart_that_cannot_start_its_workers_fails_the_job_instead_of_hanging_it(
    tmp_path: Path, write_job: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "missing.jsonl"  # the worker fails at once, and again
    cfg = RunConfig(
        job_file=write_job(missing, bound=0, size=10, lateness=0),
        state_dir=tmp_path / "state",
        restart_failures=2,
        restart_delay_ms=10,
    )
    manager = JobManager(cfg, load_configured_job(cfg))
    spawn = manager._spawn
    calls: list[int] = []

    def spawn_then_fail(*args: Any, **kwargs: Any) -> None:  # the first start, then no more
        calls.append(1)
        if len(calls) > 1:
            raise OSError(24, "Too many open files")
        spawn(*args, **kwargs)

    manager._spawn = spawn_then_fail  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger=jobmanager.__name__):
        manager.start()
        try:
            wait_until(manager.done.is_set, 60.0, what="the job to fail after its restart failed")
        finally:
            manager.stop()
    assert len(calls) == 2
    assert manager.failure is not None
    assert "restart failed: OSError: [Errno 24] Too many open files" in str(manager.failure)
    assert str(missing) in str(manager.failure)
    assert "restart failed" in caplog.text
