"""Several API processes on one port: ``weir api --workers 2`` beside ``weir run --no-api``, and
``weir run --api-workers 2``. Both processes answer (new connections reach either; /metrics
names the pid that answered), a member killed with ``kill -9`` is replaced, and SIGTERM to the
first process stops them all."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support import WeirServer, alive, job_text, wait_until

SOURCE = "generator://ads?rate=500&ids=50&clock=synthetic"


def _pid(client: httpx.Client) -> int:
    """The pid of the process behind the client's connection (/metrics names it)."""
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for s in family.samples:
            if s.name == "weir_api_process_info":
                return int(s.labels["pid"])
    raise AssertionError("no weir_api_process_info in /metrics")


def _pid_on_new_connection(base_url: str) -> int | None:
    """None when the connection was reset: it reached a member as it died."""
    try:
        with httpx.Client(base_url=base_url, timeout=10.0, trust_env=False) as c:
            return _pid(c)
    except httpx.TransportError:
        return None


def _pids_seen(base_url: str, want: int) -> set[int]:
    seen: set[int] = set()

    def enough() -> bool:
        pid = _pid_on_new_connection(base_url)
        if pid is not None:
            seen.add(pid)
        return len(seen) >= want

    wait_until(enough, 20.0, interval=0.01, what=f"{want} API processes to answer")
    return seen


def _new_pid(base_url: str, known: set[int]) -> int:
    return wait_until(
        lambda: (pid := _pid_on_new_connection(base_url)) not in known and pid or None,
        30.0,
        interval=0.02,
        what=f"a process other than {sorted(known)} to answer",
    )


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=100, size=1_000, lateness=0))
    return job


def _answers_from_each(server: WeirServer, pids: set[int]) -> None:
    """Point lookups on new connections until each process has answered one with windows."""
    left = set(pids)

    def all_answered() -> bool:
        with httpx.Client(base_url=server.base_url, timeout=10.0, trust_env=False) as c:
            r = c.get("/t1/imps/state/ad-0")
            if r.status_code == 200 and r.json()["windows"]:
                left.discard(_pid(c))
        return not left

    wait_until(all_answered, 30.0, interval=0.01, what=f"answers from each of {sorted(pids)}")


def test_weir_api_workers_answer_restart_and_stop_together(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job, state = _job(tmp_path), tmp_path / "state"
    weir_server(job, "--no-api", "--source", SOURCE, "--parallelism", "1", state_dir=state)
    api = weir_server(job, "--workers", "2", command="api", state_dir=state)
    pids = _pids_seen(api.base_url, 2)
    assert api.proc.pid in pids
    _answers_from_each(api, pids)
    # each process has its own directory of secondary instances
    assert {p.name for p in state.joinpath("t1").glob("api-*")} == {f"api-{p}" for p in pids}

    (member,) = pids - {api.proc.pid}
    os.kill(member, signal.SIGKILL)
    wait_until(lambda: not alive(member), 10.0, what="the killed member to go")
    replacement = _new_pid(api.base_url, pids)
    assert "exited code=-9; starting another" in api.stderr()

    assert api.stop() == 0
    for pid in (api.proc.pid, replacement):
        wait_until(lambda pid=pid: not alive(pid), 15.0, what=f"pid {pid} to stop")


def test_weir_run_api_workers_serve_the_in_process_api_and_another(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    server = weir_server(
        _job(tmp_path), "--source", SOURCE, "--parallelism", "1", "--api-workers", "2"
    )
    pids = _pids_seen(server.base_url, 2)
    assert server.proc.pid in pids  # the job manager's own API is one of them
    _answers_from_each(server, pids)
    assert server.stop() == 0
    for pid in pids:
        wait_until(lambda pid=pid: not alive(pid), 15.0, what=f"pid {pid} to stop")


def test_members_stop_when_the_first_process_is_killed(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job, state = _job(tmp_path), tmp_path / "state"
    weir_server(job, "--no-api", "--source", SOURCE, "--parallelism", "1", state_dir=state)
    api = weir_server(job, "--workers", "3", command="api", state_dir=state)
    members = _pids_seen(api.base_url, 3) - {api.proc.pid}
    os.kill(api.proc.pid, signal.SIGKILL)
    api.proc.wait(10)
    for pid in members:  # orphans would go on holding the port and the job's files
        wait_until(lambda pid=pid: not alive(pid), 15.0, what=f"member {pid} to stop")
