"""Honest freshness, against a real RocksDB whose worker is this test, with real checkpoints, and
the API on loopback: ``X-Weir-As-Of`` stays put while catch-ups with the primary fail, and
opening the committed view of a new checkpoint (made slow here) holds up no other request."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.security._http import serve, sliding_job, write_keys
from tests.support import FixedRuntime, wait_until
from weir.api import JobHandle, Registry, create_app
from weir.api.committed import CommittedReader, CommittedView
from weir.state.checkpoints import CheckpointStorage
from weir.state.rocksdb import RocksState
from weir.state.secondary import SecondaryReader

BOUND_S = 0.5  # what a request may take while a view opens (it takes far less when all is well)


class Runtime(FixedRuntime):
    last_checkpoint: int | None = 1


@dataclass
class Setup:
    client: httpx.Client
    runtime: Runtime
    reader: SecondaryReader
    primary: Path
    gate: threading.Event  # opening checkpoint 2 waits for it
    opening: threading.Event  # set once opening checkpoint 2 has begun


def _checkpoint(db: RocksState, storage: CheckpointStorage, n: int, tmp: Path) -> None:
    local = tmp / f"local-{n}"
    db.checkpoint(local)
    files, _ = storage.upload(local, n, 0, f"w0-{n}", {})
    storage.write_metadata(
        n,
        {
            "id": n,
            "time": n * 1000,
            "watermark": 0,
            "workers": [
                {"index": 0, "key_groups": [0, 127], "files": [f.to_json() for f in files]}
            ],
        },
    )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    job = sliding_job(tmp_path)
    primary = tmp_path / "db"
    write_keys(primary, job, ["k-1", "k-2"], frozenset())
    db = RocksState(primary)  # the worker, which keeps its database open
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    _checkpoint(db, storage, 1, tmp_path)
    db.write({b"unrelated": b"x"})
    _checkpoint(db, storage, 2, tmp_path)
    gate, opening = threading.Event(), threading.Event()

    def opener(st: CheckpointStorage, n: int, workdir: Path) -> CommittedView:
        if n == 2:
            opening.set()
            gate.wait(30.0)
        return CommittedView(st, n, workdir)

    runtime = Runtime(tmp_path / "chk")
    reader = SecondaryReader(primary, tmp_path / "secondary", catch_up_ms=5)
    committed = CommittedReader(storage, tmp_path / "committed", opener=opener)
    registry = Registry()
    registry.add(JobHandle(job, runtime, [reader], committed=committed))
    try:
        with (
            serve(create_app(registry)) as served,
            httpx.Client(base_url=served.base_url, timeout=30.0, trust_env=False) as client,
        ):
            yield Setup(client, runtime, reader, primary, gate, opening)
    finally:
        gate.set()
        db.close()


def _as_of(client: httpx.Client) -> int:
    r = client.get("/j/op/state/k-1")
    assert r.status_code == 200, r.text
    return int(r.headers["x-weir-as-of"])


def test_as_of_moves_only_when_a_catch_up_succeeded(setup: Setup) -> None:
    client, reader = setup.client, setup.reader
    first = _as_of(client)
    wait_until(lambda: _as_of(client) > first, 5.0, what="a successful catch-up to move as-of")
    # the primary's MANIFEST is no longer where CURRENT points: every catch-up fails
    (setup.primary / "CURRENT").write_text("MANIFEST-999999\n")
    # the reader's thread may have caught up once more before that: as-of stays from the
    # first failure on
    failed = reader.catch_up_failures
    wait_until(lambda: reader.catch_up_failures > failed, 5.0, what="a failed catch-up")
    stuck = _as_of(client)
    for _ in range(6):
        time.sleep(0.01)  # past catch_up_ms, so each request tries again
        assert _as_of(client) == stuck
    assert reader.catch_up_failures >= 5 and stuck == int(reader.caught_up_at * 1000)
    scraped = client.get("/metrics")
    assert scraped.status_code == 200, scraped.text
    failures = [
        s.value
        for family in text_string_to_metric_families(scraped.text)
        for s in family.samples
        if s.name == "weir_state_catch_up_failures_total"
    ]
    assert failures and failures[0] >= 5, failures
    r = wait_until(
        lambda: (r := client.get("/j/op/state/k-1")).headers["age"] != "0" and r, 3.0, what="age"
    )
    assert int(r.headers["age"]) >= 1 and int(r.headers["x-weir-as-of"]) == stuck


def _timed_get(client: httpx.Client, path: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    r = client.get(path)
    return time.perf_counter() - started, r


def test_opening_a_new_committed_view_holds_up_no_request(setup: Setup) -> None:
    client = setup.client
    committed = "/j/op/state/k-1?consistency=committed"
    r = client.get(committed)
    assert r.status_code == 200 and r.json()["checkpoint"] == 1, r.text
    assert r.headers["x-weir-as-of"] == "1000"
    setup.runtime.last_checkpoint = 2  # a newer checkpoint completed; opening it is slow
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline or not setup.opening.is_set():
        for path in ("/health", committed, "/j/op/state/k-2"):
            took, r = _timed_get(client, path)
            assert r.status_code == 200, (path, r.text)
            assert took < BOUND_S, f"{path} took {took:.3f}s while a view was opening"
        assert client.get(committed).json()["checkpoint"] == 1  # the previous view answers
        assert time.monotonic() < deadline + 5.0, "opening checkpoint 2 never began"
    setup.gate.set()
    wait_until(lambda: client.get(committed).json()["checkpoint"] == 2, 10.0, what="the new view")
    assert client.get(committed).headers["x-weir-as-of"] == "2000"
