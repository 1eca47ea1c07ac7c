"""``weir api``'s view of a job manager in another process: the status file (missing, fresh,
stale, a new run, one this weir cannot read) and the control channel (round trip, errors keep
their type, a wrong key or a silent client gets nothing and blocks nobody)."""

from __future__ import annotations

import os
import re
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.support import LOCAL, wait_until
from weir import Job, agg, sources, windows
from weir.api import ApiSettings, Registry, create_app, handle_for
from weir.api.remote import RemoteRuntime
from weir.base.errors import ControlError, PathRefused
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control import admin, status
from weir.engine.runtime.view import STATUS_FORMAT, JobStatus, unreported
from weir.engine.runtime.wire import from_plain
from weir.state.checkpoints import CheckpointStorage, now_ms
from weir.state.keygroups import KeyGroupRange


def _job(tmp_path: Path) -> Job:
    job = Job("j")
    (
        job.source(sources.jsonl(tmp_path / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=1000))
        .aggregate("op", n=agg.count())
    )
    return job


def _body(**fields: Any) -> dict[str, Any]:
    workers = [
        {**unreported(0, KeyGroupRange(0, 63)), "records_in": 5},
        {**unreported(1, KeyGroupRange(64, 127)), "records_in": 7},
    ]
    return {
        "format": STATUS_FORMAT,
        "job": "j",
        "run_id": "r1",
        "pid": 1,
        "generation": 0,
        "written_at": now_ms(),
        "state": "running",
        "failure": None,
        "source": "file:///in.jsonl",
        "operators": ["op"],
        "parallelism": 2,
        "max_parallelism": 128,
        "ranges": [[0, 63], [64, 127]],
        "restarts": 0,
        "workers": workers,
        "checkpoints": [],
        "completed_checkpoints": 0,
        "checkpoint_problem": None,
        "dead_letter_problem": None,
        "state_retention_ms": 3_600_000,
        "restored_from": None,
        "backfills": [],
        "last_checkpoint": None,
        "control_port": None,
        "api_url": None,
        "cluster": False,
        "ended": False,
        **fields,
    }


def _publish(job_dir: Path, **fields: Any) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    status.write_status(status.status_path(job_dir), from_plain(JobStatus, _body(**fields)))


def _api(tmp_path: Path) -> tuple[TestClient, RemoteRuntime]:
    job = _job(tmp_path)
    cfg = RunConfig(job_file=tmp_path / "job.py", state_dir=tmp_path / "state")
    # stale after 4 s: the stale case is 5 s old, and a loaded machine can take a second to ask
    runtime = RemoteRuntime(
        job, cfg.job_dir("j"), CheckpointStorage(cfg.checkpoints_root, "j"), stale_after_s=4.0
    )
    registry = Registry()
    registry.add(handle_for(job, runtime, cfg, cfg.job_dir("j") / "api-test"))
    app = create_app(registry, ApiSettings())
    return TestClient(app, base_url=LOCAL, raise_server_exceptions=False), runtime


def _wait_refresh() -> None:
    time.sleep(0.06)  # past RemoteRuntime's re-read interval (50 ms): a cache, not a condition


def test_before_the_job_manager_publishes_the_api_answers_without_5xx(tmp_path: Path) -> None:
    client, runtime = _api(tmp_path)
    health = client.get("/health").json()
    assert health["status"] == "degraded" and health["jobs"] == {"j": "unknown"}
    assert "jobmanager.json is missing" in health["problems"]["j"]
    assert client.get("/jobs/j").json()["state"] == "unknown"
    r = client.get("/j/op/state/k")
    assert r.status_code == 503 and r.json()["error"]["code"] == "state_unavailable"
    r = client.post("/jobs/j/savepoints")
    assert r.status_code == 409 and "is not running" in r.json()["error"]["message"]
    assert runtime.parallelism == 0


def test_a_fresh_status_is_the_job_and_a_stale_one_is_unknown(tmp_path: Path) -> None:
    client, runtime = _api(tmp_path)
    job_dir = tmp_path / "state" / "j"
    _publish(job_dir)
    _wait_refresh()
    assert client.get("/health").json() == {"status": "ok", "jobs": {"j": "running"},
                                            "problems": {}}  # fmt: skip
    detail = client.get("/jobs/j").json()
    assert detail["parallelism"] == 2 and detail["records_in"] == 12
    assert [w["key_groups"] for w in detail["workers"]] == [[0, 63], [64, 127]]

    _publish(job_dir, written_at=now_ms() - 5_000)  # the job manager stopped publishing
    _wait_refresh()
    health = client.get("/health").json()
    assert health["status"] == "degraded" and health["jobs"] == {"j": "unknown"}
    assert "s old; is weir run still running" in health["problems"]["j"]
    assert client.get("/jobs/j").json()["records_in"] == 12  # the last known figures
    assert runtime.state() == "unknown"


@pytest.mark.parametrize("state", ["stopped", "cancelled", "finished"])
def test_a_job_that_ended_stays_as_it_ended_however_old(tmp_path: Path, state: str) -> None:
    client, runtime = _api(tmp_path)
    _publish(tmp_path / "state" / "j", state=state, ended=True, written_at=now_ms() - 60_000)
    _wait_refresh()
    assert runtime.state() == state and client.get("/jobs/j").json()["state"] == state
    assert client.get("/health").json()["problems"]["j"] == f"the job was {state}"
    r = client.post("/jobs/j/savepoints")
    assert r.status_code == 409 and "is not running" in r.json()["error"]["message"]


def test_a_new_run_or_a_restart_makes_readers_reopen(tmp_path: Path) -> None:
    _, runtime = _api(tmp_path)
    job_dir = tmp_path / "state" / "j"
    _publish(job_dir)
    _wait_refresh()
    first = runtime.generation
    _publish(job_dir, completed_checkpoints=1)  # same run, same generation
    _wait_refresh()
    assert runtime.generation == first
    _publish(job_dir, generation=1)
    _wait_refresh()
    assert runtime.generation == first + 1
    _publish(job_dir, run_id="r2", generation=0, parallelism=1, ranges=[[0, 127]])
    _wait_refresh()
    assert runtime.generation == first + 2 and runtime.parallelism == 1


def test_a_caller_during_another_ones_read_gets_what_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """API threads ask at once: one that finds a read under way waits for it, and never takes
    the status from before it (none, at the first read) for the job's."""
    job_dir = tmp_path / "state" / "j"
    _publish(job_dir)
    runtime = RemoteRuntime(_job(tmp_path), job_dir, CheckpointStorage(tmp_path / "chk", "j"))
    answers: list[str] = []
    read = status.read_status

    def read_while_another_asks(path: Path) -> JobStatus | None:
        other = threading.Thread(target=lambda: answers.append(runtime.state()))
        other.start()
        other.join(0.5)  # it answers now only if it does not wait for this read
        found = read(path)
        monkeypatch.setattr(status, "read_status", read)
        return found

    monkeypatch.setattr(status, "read_status", read_while_another_asks)
    assert runtime.state() == "running"
    wait_until(lambda: answers, 5.0, what="the other caller's answer")
    assert answers == ["running"]


def test_a_job_file_with_other_operators_is_named(tmp_path: Path) -> None:
    client, _ = _api(tmp_path)
    _publish(tmp_path / "state" / "j", operators=["other"])
    _wait_refresh()
    assert (
        "the running job has operators ['other']" in client.get("/health").json()["problems"]["j"]
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"format": 2}, f"has format 2, this weir reads {STATUS_FORMAT}"),
        ({"parallelism": "2"}, r"jobmanager.json.parallelism: expected int, got str '2'"),
        ({"extra": 1}, r"unknown \['extra'\]"),
    ],
)
def test_a_status_this_weir_cannot_read_is_named(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    client, runtime = _api(tmp_path)
    job_dir = tmp_path / "state" / "j"
    job_dir.mkdir(parents=True)
    status.status_path(job_dir).write_bytes(orjson.dumps(_body(**change)))
    _wait_refresh()
    health = client.get("/health").json()
    assert health["status"] == "degraded" and health["jobs"] == {"j": "unknown"}
    assert re.search(named, health["problems"]["j"]), health["problems"]["j"]
    assert "cannot read the job manager's status" in health["problems"]["j"]
    _publish(job_dir)  # the right weir publishes again: the problem goes
    _wait_refresh()
    assert client.get("/health").json()["status"] == "ok"
    assert runtime.worker_status()[1]["records_in"] == 7


# -- the control channel --------------------------------------------------------------------


def _server(tmp_path: Path) -> tuple[admin.ControlServer, bytes]:
    def refuse(args: dict[str, Any]) -> dict[str, Any]:
        raise PathRefused(f"backfill path {args['path']!r} is not under /allowed")

    key = admin.write_key(tmp_path)
    server = admin.ControlServer(key, {"echo": lambda args: {"got": args}, "backfill": refuse})
    server.start()
    return server, key


def test_the_key_file_is_its_owners_only(tmp_path: Path) -> None:
    key = admin.write_key(tmp_path)
    mode = stat.S_IMODE(os.stat(admin.key_path(tmp_path)).st_mode)
    assert mode == 0o600 and admin.read_key(tmp_path) == key and len(key) == 32


def test_a_call_round_trips_and_errors_keep_their_type(tmp_path: Path) -> None:
    server, key = _server(tmp_path)
    try:
        assert admin.call(server.port, key, "echo", {"a": [1, "x"]}, 5.0) == {
            "got": {"a": [1, "x"]}
        }
        with pytest.raises(PathRefused, match="'/etc' is not under /allowed"):
            admin.call(server.port, key, "backfill", {"path": "/etc"}, 5.0)
        with pytest.raises(ControlError, match="unknown op 'rm'"):
            admin.call(server.port, key, "rm", {}, 5.0)
    finally:
        server.stop()


def test_a_wrong_key_gets_nothing_done(tmp_path: Path) -> None:
    server, key = _server(tmp_path)
    try:
        with pytest.raises(ControlError, match="closed the control channel"):
            admin.call(server.port, b"x" * 32, "echo", {}, 5.0)
    finally:
        server.stop()


def test_a_job_manager_that_does_not_answer_in_time_is_a_runtime_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A control-channel timeout is the job manager's failure, not the command's usage: a
    ``ControlError`` (exit 1), never a ``ConfigError`` (exit 2). (The client waits for the
    answer ``HANDSHAKE_S`` past the operation's own timeout: 1 s here, not 5.)"""
    monkeypatch.setattr(admin, "HANDSHAKE_S", 1.0)
    release = threading.Event()
    key = admin.write_key(tmp_path)
    server = admin.ControlServer(key, {"stall": lambda args: {"done": release.wait(10.0)}})
    server.start()
    try:
        with pytest.raises(ControlError, match="did not answer stall in time") as err:
            admin.call(server.port, key, "stall", {}, 0.1)
        assert err.value.exit_code == 1
    finally:
        release.set()
        server.stop()


def test_a_silent_client_blocks_nobody(tmp_path: Path) -> None:
    server, key = _server(tmp_path)
    try:
        with socket.create_connection((admin.HOST, server.port)):  # connects, says nothing
            assert admin.call(server.port, key, "echo", {}, 5.0) == {"got": {}}
    finally:
        server.stop()


def test_nothing_listening_is_a_clear_error(tmp_path: Path) -> None:
    server, key = _server(tmp_path)
    server.stop()
    with pytest.raises(ControlError, match="nothing listens at 127.0.0.1"):
        admin.call(server.port, key, "echo", {}, 5.0)


def test_what_an_admin_call_did_is_seen_as_soon_as_it_answers(tmp_path: Path) -> None:
    """The job manager publishes a savepoint before it answers for it: the next read is of
    that status, not of the one read just before the call (however recently)."""
    job_dir = tmp_path / "state" / "j"
    job_dir.mkdir(parents=True)

    def savepoint(args: dict[str, Any]) -> dict[str, Any]:
        _publish(job_dir, control_port=server.port, last_checkpoint=4, completed_checkpoints=4)
        return {"id": 4, "path": str(tmp_path / "chk-4")}

    server = admin.ControlServer(admin.write_key(job_dir), {"savepoint": savepoint})
    server.start()
    try:
        _publish(job_dir, control_port=server.port, last_checkpoint=3, completed_checkpoints=3)
        runtime = RemoteRuntime(_job(tmp_path), job_dir, CheckpointStorage(tmp_path / "c", "j"))
        assert runtime.last_checkpoint == 3
        assert runtime.trigger_savepoint(5.0)["id"] == 4
        assert (runtime.last_checkpoint, runtime.completed_checkpoints) == (4, 4)
    finally:
        server.stop()
