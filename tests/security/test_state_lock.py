"""One run per state directory (issue 17, item 7): a second ``weir run`` of a running job on the
same ``--state-dir`` fails at once, naming the first run's pid, and deletes nothing: the first
run's RocksDB stays and its API keeps serving the first run's windows. The lock is the
kernel's, so a run killed with ``kill -9`` leaves none behind."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WEIR, WeirServer, job_text, write_events
from weir.base.errors import ConfigError
from weir.engine.runtime.control.runlock import RunLock

FIRST = [{"id": "first", "event": "impression", "ts": t, "value": 1} for t in range(0, 50, 5)]
SECOND = [{"id": "second", "event": "impression", "ts": t, "value": 2} for t in range(0, 50, 5)]


def _job(tmp_path: Path, name: str, events: list[dict[str, object]]) -> Path:
    src = write_events(tmp_path / f"{name}.jsonl", events)
    path = tmp_path / f"{name}.py"
    path.write_text(job_text(src, bound=0, size=10, lateness=0))
    return path


def _second_run(job: Path, state: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    return subprocess.run(
        [*WEIR, "run", str(job), "--state-dir", str(state), "--api-port", "0", "--exit-at-end"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _db_files(job_dir: Path) -> dict[str, int]:
    return {
        str(p.relative_to(job_dir)): p.stat().st_ino
        for p in job_dir.glob("worker-*/db/*")
        if p.suffix in (".sst", ".log") or p.name.startswith("MANIFEST")
    }


def test_a_second_run_on_the_same_state_dir_fails_and_deletes_nothing(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    state = tmp_path / "state"
    first = weir_server(_job(tmp_path, "first", FIRST), "--parallelism", "2", state_dir=state)
    first.wait_finished()
    client = first.client()
    before = client.get("/t1/imps/state/first").json()["windows"]
    assert len(before) == 5
    files = _db_files(first.job_dir)
    assert files, "the first run has no RocksDB files"

    second = _second_run(_job(tmp_path, "second", SECOND), state, tmp_path)

    assert second.returncode == 2, second.stderr
    assert "already running" in second.stderr and f"pid {first.proc.pid}" in second.stderr
    assert "weir stop t1" in second.stderr
    assert first.proc.poll() is None
    assert _db_files(first.job_dir) == files  # no file removed or replaced
    assert client.get("/t1/imps/state/first").json()["windows"] == before
    assert client.get("/t1/imps/state/second").status_code == 404
    assert client.get("/jobs/t1").json()["state"] == "finished"


def test_a_run_killed_with_kill_9_leaves_no_lock(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    state = tmp_path / "state"
    first = weir_server(_job(tmp_path, "first", FIRST), state_dir=state)
    lock = first.job_dir / "run.lock"
    assert lock.read_text().strip() == str(first.proc.pid)
    os.killpg(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)

    again = _second_run(_job(tmp_path, "second", SECOND), state, tmp_path)

    assert again.returncode == 0, again.stderr


def test_the_lock_names_the_holder_in_process(tmp_path: Path) -> None:
    held = RunLock(tmp_path / "t1", "t1")
    held.acquire()
    try:
        with pytest.raises(ConfigError, match=rf"already running .*pid {os.getpid()}"):
            RunLock(tmp_path / "t1", "t1").acquire()
    finally:
        held.release()
    again = RunLock(tmp_path / "t1", "t1")
    again.acquire()  # released: free again
    again.release()
