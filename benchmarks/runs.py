"""Run a job the way ``weir run`` does (job manager + spawned workers) and time it, or start it as
a real ``weir run`` process and probe its HTTP API."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import load_configured_job


def timed_run(job_file: Path, state_dir: Path, parallelism: int, **settings: Any) -> dict[str, Any]:
    """Run a bounded job to its end with ``parallelism`` workers; time from the moment every
    worker was connected and reading to the last one finishing (start-up is not counted)."""
    cfg = RunConfig(
        job_file=job_file,
        state_dir=state_dir,
        parallelism=parallelism,
        exit_at_end=True,
        log_level="WARNING",
        **settings,
    )
    manager = JobManager(cfg, load_configured_job(cfg))
    manager.start()
    try:
        if not manager.done.wait(600):
            raise TimeoutError(f"{job_file} did not finish in 600 s")
        if manager.failure is not None:
            raise manager.failure
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status = manager.worker_status()
            if all(s["finished_at"] for s in status):
                break
            time.sleep(0.02)
    finally:
        manager.stop()
    started = min(s["run_started_at"] for s in status)
    first = min((s["first_record_at"] for s in status if s["first_record_at"]), default=started)
    finished = max(s["finished_at"] for s in status)
    events = sum(s["records_in"] for s in status)
    seconds = finished - started
    result: dict[str, Any] = {
        "parallelism": parallelism,
        "events": events,
        "seconds": round(seconds, 3),
        "events_per_s": round(events / seconds),
        "seconds_from_first_record": round(finished - first, 3),
        "backpressure": [s["backpressure"] for s in status],
    }
    if manager.checkpoints:
        result["checkpoints"] = manager.checkpoints
    return result


@contextmanager
def serving(
    job_file: Path,
    state_dir: Path,
    *args: str,
    start_timeout_s: float = 60.0,
    on_line: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """A real ``weir run`` process on a free loopback port; yields its base URL. ``args`` come
    after the defaults (a later ``--log-level`` wins); ``on_line`` sees each line of its log as
    it is written (a cluster job's restarts are timed by theirs)."""
    cmd = [
        sys.executable,
        "-m",
        "weir",
        "run",
        str(job_file),
        "--api-port",
        "0",
        "--state-dir",
        str(state_dir),
        "--log-level",
        "WARNING",
        *args,
    ]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    lines: list[str] = []
    started = threading.Event()

    def drain() -> None:  # keep reading, or a chatty server blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if on_line is not None:
                on_line(line)
            if "serving on" in line:
                started.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not started.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("weir run did not start; its log:\n" + "".join(lines))
        found = next(
            re.search(r"serving on (http://\S+)", ln) for ln in lines if "serving on" in ln
        )
        assert found is not None
        try:
            yield found.group(1)
        except Exception as exc:
            time.sleep(0.5)
            raise RuntimeError(
                f"{exc!r} while weir run was serving (exit status {proc.poll()}); its log:\n"
                + "".join(lines[-40:])
            ) from exc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
