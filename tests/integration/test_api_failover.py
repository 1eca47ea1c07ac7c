"""``weir api`` follows the job's leader (issue 42 item 3; ``api.leader``): two real job managers
with state directories of their own share one checkpoint storage (a directory, or a prefix on the
S3 test server); one ``weir api`` process serves the job throughout. The first job manager is
killed with kill -9: the API answers 503 with ``Retry-After`` and the reason instead of the dead
one's state; the second takes the lease over, restores, and the same API process (no restart)
finds it in the lease and answers from its state, at least as new as before; the final answers
equal the brute-force model's."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support import WeirServer, alive, descendants, job_text, wait_until
from tests.support.reference import Spec, simulate
from tests.support.servers import S3Place
from weir.engine.sources.generator import GeneratorSource

COUNT, RATE = 30_000, 2_000  # 15 s of input: the first job manager dies halfway
GEN: dict[str, Any] = dict(ids=20, seed=11, clock="synthetic", disorder=50)
SOURCE = f"generator://ads?rate={RATE}&count={COUNT}&splits=1&" + "&".join(
    f"{k}={v}" for k, v in GEN.items()
)
SPEC = Spec(bound=100, size=1_000, lateness=0)
LEASE_MS = 3000


@pytest.fixture(params=["dir", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The checkpoint storage both job managers and the API share, and the environment a
    ``weir`` process needs to reach it."""
    if request.param == "dir":
        return str(tmp_path / "chk"), {}
    s3: S3Place = request.getfixturevalue("s3")
    return s3.url, dict(s3.env)


def _get(client: httpx.Client, key: str) -> httpx.Response:
    return client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"limit": 10_000})


def _answer(client: httpx.Client, key: str) -> dict[str, Any] | None:
    r = _get(client, key)
    return r.json() if r.status_code == 200 else None


def test_the_api_follows_a_failover_to_another_job_manager_without_a_restart(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    storage: tuple[str, dict[str, str]],
) -> None:
    where, env = storage
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=SPEC.bound, size=SPEC.size,
                            lateness=SPEC.lateness))  # fmt: skip
    flags = (
        "--no-api", "--source", SOURCE, "--parallelism", "2", "--checkpoint-interval-ms", "300",
        "--checkpoint-dir", where, "--lease-ms", str(LEASE_MS), "--restore", "auto",
    )  # fmt: skip
    first = weir_server(job, *flags, state_dir=tmp_path / "a", env=env)
    api = weir_server(
        job, "--checkpoint-dir", where, command="api", state_dir=tmp_path / "a", env=env
    )
    client = api.client()

    def two_windows() -> dict[str, Any] | None:
        body = _answer(client, "ad-0")
        ready = body and body["watermark"] is not None and len(body["windows"]) >= 2
        return body if ready else None

    before = wait_until(two_windows, 30.0, what="ad-0 to have two windows")
    wait_until(lambda: (client.get("/jobs/t1").json()["last_checkpoint"] or 0) >= 2, 30.0,
               what="two committed checkpoints")  # fmt: skip
    workers = descendants(first.proc.pid)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    wait_until(lambda: not any(alive(w) for w in workers), 15.0, what="orphaned workers to exit")

    # no leader vouches for the state it sees: 503, Retry-After and why, never the dead state
    def refused() -> httpx.Response | None:
        r = _get(client, "ad-0")
        return r if r.status_code == 503 else None

    r = wait_until(refused, 15.0, what="the API to refuse live reads of a dead job manager")
    assert r.headers["Retry-After"] == "1"
    message = r.json()["error"]["message"]
    assert "not live" in message or "has not renewed its lease" in message, message
    health = client.get("/health").json()
    assert health["status"] == "degraded", health

    second = weir_server(job, *flags, state_dir=tmp_path / "b", env=env, timeout=60)
    assert "restored from" in second.stderr(), second.stderr()

    def caught_up() -> dict[str, Any] | None:
        # the new leader's state can show before its workers report their watermark, and an
        # open window's count at one watermark depends on how far past it the reads went:
        # wait for every window seen before to have at least its count again
        body = _answer(client, "ad-0")
        if not body or (body["watermark"] or -1) < before["watermark"]:
            return None
        counts = {w["start"]: w["count"] for w in body["windows"]}
        behind = [w for w in before["windows"] if counts.get(w["start"], -1) < w["count"]]
        return None if behind else body

    wait_until(caught_up, 30.0, what="answers from the new leader as far as the old one's")
    assert api.proc.poll() is None  # the same API process throughout
    assert "follows its leader's state in " + str(tmp_path / "b") in api.stderr(), api.stderr()

    # the final answers, from the second job manager's state: the model's
    wait_until(lambda: client.get("/jobs/t1").json()["state"] == "finished", 90.0,
               what="the job to finish")  # fmt: skip
    events = GeneratorSource(rate=0, count=COUNT, **GEN).open("0/1").read_batch(COUNT).items
    expected = simulate([json.dumps(e) for e in events], SPEC).state_by_key()
    for key, windows in expected.items():
        body = _answer(client, key)
        assert body is not None and body["windows"] == windows, key
