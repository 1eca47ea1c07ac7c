"""``weir api`` follows the job's leader (``api.leader``, ``api.remote``): the lease in a
directory checkpoint storage names the leader's state directory, whose status and state the API
reads; a lease not renewed, a leader that has not published yet, or one whose directory is not on
this host make live reads 503 with ``Retry-After`` and the reason, and ``/health`` degraded."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support import LOCAL
from tests.support.http_stub import served
from tests.unit.test_remote_runtime import _job, _publish
from weir.api import ApiSettings, Registry, create_app, handle_for
from weir.api.leader import LeaderWatch
from weir.api.remote import RemoteRuntime
from weir.engine.runtime.config import RunConfig
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import Holder, LeaderRecord, LeaseStore

LEASE_MS = 2000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _holder(state_dir: Path, run: str, lock: str | None = None) -> Holder:
    """A job manager with ``state_dir``; ``lock`` defaults to its run lock's device:inode."""
    if lock is None:
        lock_file = state_dir / "j" / "run.lock"
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock_file.touch()
        st = lock_file.stat()
        lock = f"{st.st_dev}:{st.st_ino}"
    return Holder(run, "host-b", "", 1, str(state_dir), lock)


class Api:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = Clock()
        cfg = RunConfig(job_file=tmp_path / "job.py", state_dir=tmp_path / "a")
        self.storage = CheckpointStorage(tmp_path / "chk", "j")
        self.leases = LeaseStore(self.storage)
        self.watch = LeaderWatch(self.storage, clock=self.clock)
        job = _job(tmp_path)
        self.runtime = RemoteRuntime(
            job, cfg.job_dir("j"), self.storage, stale_after_s=4.0, leader=self.watch
        )
        registry = Registry()
        self.handle = handle_for(job, self.runtime, cfg, cfg.job_dir("j") / "api-test")
        registry.add(self.handle)
        app = create_app(registry, ApiSettings())
        self.client = TestClient(app, base_url=LOCAL, raise_server_exceptions=False)

    def read(self) -> None:
        """The watch reads the lease; the runtime's status cache (50 ms) runs out."""
        self.watch.poll()
        time.sleep(0.06)
        self.runtime.state()


def test_without_a_lease_the_api_reads_its_own_state_directory(tmp_path: Path) -> None:
    api = Api(tmp_path)
    _publish(tmp_path / "a" / "j")
    api.read()
    assert api.runtime.job_dir == tmp_path / "a" / "j"
    assert api.runtime.live_problem is None
    assert api.client.get("/health").json()["status"] == "ok"


def test_the_api_follows_the_lease_to_the_leaders_state_directory(tmp_path: Path) -> None:
    api = Api(tmp_path)
    _publish(tmp_path / "a" / "j", run_id="r1")
    record = LeaderRecord("j", 1, _holder(tmp_path / "a", "r1"), LEASE_MS)
    version = api.leases.create(record)
    api.read()
    assert api.runtime.live_problem is None and api.runtime.parallelism == 2

    # the job manager of state directory b took over: until it publishes, no live answers
    new = LeaderRecord("j", 2, _holder(tmp_path / "b", "r2"), LEASE_MS)
    api.leases.replace(new, version)
    api.read()
    assert api.runtime.job_dir == tmp_path / "b" / "j"
    r = api.client.get("/j/op/state/k")
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    message = r.json()["error"]["message"]
    assert "waiting for the job's leader (run r2 on host-b, epoch 2) to publish" in message
    assert api.client.get("/health").json()["status"] == "degraded"

    _publish(tmp_path / "b" / "j", run_id="r2", parallelism=1, ranges=[[0, 127]])
    api.read()
    assert api.runtime.live_problem is None and api.runtime.parallelism == 1
    assert api.client.get("/health").json()["status"] == "ok"
    handle = api.handle
    handle.reader_for(0)  # the readers now read b's worker files
    assert [getattr(r, "primary", None) for r in handle.readers] == [
        tmp_path / "b" / "j" / "worker-0" / "db"
    ]


def test_a_lease_nobody_renews_is_no_leader(tmp_path: Path) -> None:
    api = Api(tmp_path)
    _publish(tmp_path / "a" / "j", run_id="r1")
    api.leases.create(LeaderRecord("j", 1, _holder(tmp_path / "a", "r1"), LEASE_MS))
    api.read()
    assert api.runtime.live_problem is None
    api.clock.now += LEASE_MS / 1000 + 0.1  # the same version for longer than the lease
    _publish(tmp_path / "a" / "j", run_id="r1")  # even a status that looks fresh
    api.read()
    r = api.client.get("/j/op/state/k")
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert "has not renewed its lease" in r.json()["error"]["message"]
    assert "waiting for a job manager to take over" in r.json()["error"]["message"]


def test_a_leader_whose_directory_is_not_on_this_host_is_named(tmp_path: Path) -> None:
    api = Api(tmp_path)
    (tmp_path / "b" / "j").mkdir(parents=True)
    _publish(tmp_path / "b" / "j", run_id="old")  # the same path holds another host's files
    holder = Holder("r3", "host-c", "", 1, str(tmp_path / "b"), "1:2", api="http://10.0.0.3:8000")
    api.leases.create(LeaderRecord("j", 3, holder, LEASE_MS))
    api.read()
    message = api.runtime.live_problem or ""
    assert "keeps its state in" in message and "not on this host" in message, message
    assert "http://10.0.0.3:8000" in message


def test_a_stale_status_is_not_served_as_live(tmp_path: Path) -> None:
    api = Api(tmp_path)
    _publish(tmp_path / "a" / "j", written_at=int(time.time() * 1000) - 10_000)
    api.read()
    r = api.client.get("/j/op/state/k")
    assert r.status_code == 503 and "not live" in r.json()["error"]["message"]


def _echo_leader() -> Any:
    """The leader's API, as a stub: says what it was asked, with which headers."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse(
            {"path": request.url.path, "query": request.url.query, "method": request.method,
             "auth": request.headers.get("authorization"), "body": body.decode(),
             "forwarded": request.headers.get("x-weir-forwarded")},
            headers={"ETag": '"e1"'},
        )  # fmt: skip

    return Starlette(routes=[Route("/{rest:path}", echo, methods=["GET", "POST"])])


def test_a_leader_on_another_host_is_asked_through_its_api(tmp_path: Path) -> None:
    """Its state is not here, its lease names its API: this API authenticates a request and
    forwards it there, with its token, and answers as the leader answered; /metrics stays this
    process's own; a leader that does not answer is a 503 naming it."""
    cfg = RunConfig(job_file=tmp_path / "job.py", state_dir=tmp_path / "a")
    storage = CheckpointStorage(tmp_path / "chk", "j")
    watch = LeaderWatch(storage)
    job = _job(tmp_path)
    runtime = RemoteRuntime(job, cfg.job_dir("j"), storage, leader=watch)
    registry = Registry()
    registry.add(handle_for(job, runtime, cfg, cfg.job_dir("j") / "api-test"))
    app = create_app(registry, ApiSettings(token="s3cret-token-of-32-characters-xx"))
    client = TestClient(app, base_url=LOCAL, raise_server_exceptions=False)
    auth = {"Authorization": "Bearer s3cret-token-of-32-characters-xx"}
    with served(_echo_leader()) as url:
        holder = Holder("r4", "host-d", "", 1, "/elsewhere", "9:9", api=url)
        version = LeaseStore(storage).create(LeaderRecord("j", 4, holder, LEASE_MS))
        watch.poll()
        time.sleep(0.06)
        r = client.get("/j/op/state/k?limit=3", headers=auth)
        assert r.status_code == 200, r.text
        assert r.json() == {
            "path": "/j/op/state/k", "query": "limit=3", "method": "GET",
            "auth": auth["Authorization"], "body": "", "forwarded": "1",
        }  # fmt: skip
        assert r.headers["etag"] == '"e1"'
        posted = client.post("/jobs/j/savepoints", headers=auth, json={"a": 1}).json()
        assert posted["method"] == "POST" and posted["body"] == '{"a":1}'
        assert client.get("/j/op/state/k").status_code == 401  # authenticated here first
        assert "weir_" in client.get("/metrics", headers=auth).text  # its own metrics
    # the leader's API is gone: 503, Retry-After, its address
    LeaseStore(storage).replace(
        LeaderRecord("j", 5, replace(holder, api="http://127.0.0.1:9"), LEASE_MS), version
    )
    watch.poll()
    time.sleep(0.06)
    r = client.get("/j/op/state/k", headers=auth)
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "leader_unreachable"
    assert "http://127.0.0.1:9" in r.json()["error"]["message"]


def test_a_lease_read_that_raises_what_storage_did_not_wrap_is_an_error_not_a_dead_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch's thread caught only ``StorageError``; an ``OSError`` a store let through
    ended it, the last lease seen froze, and a lease later the API said its leader had
    stopped renewing. Now the read's error is the answer until a read succeeds again."""
    storage = CheckpointStorage(tmp_path / "chk", "j")
    watch = LeaderWatch(storage, clock=Clock())
    reads: list[int] = []

    def failing(*args: Any) -> Any:
        reads.append(1)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(watch.leases, "read", failing)
    watch.poll()  # raised before: the thread calls exactly this
    assert reads == [1] and watch.leader.error == "[Errno 5] Input/output error"
    monkeypatch.undo()
    watch.poll()
    assert watch.leader.error is None
