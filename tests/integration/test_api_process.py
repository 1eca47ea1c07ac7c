"""The API as a process of its own (``weir api`` beside ``weir run --no-api``): killed with
``kill -9`` while the job runs, the job goes on processing; a new ``weir api`` on the same port
answers at least as new as before, takes savepoints over the job manager's control channel and
refuses what the job manager refuses; the job's results equal the brute-force model's."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from tests.support import WeirServer, job_text, wait_until
from tests.support.reference import Spec, simulate
from weir.engine.sources.generator import GeneratorSource

COUNT, RATE = 40_000, 2_500  # 16 s of input: the job runs through the whole kill and restart
GEN: dict[str, Any] = dict(ids=20, seed=5, clock="synthetic", disorder=50)
SOURCE = f"generator://ads?rate={RATE}&count={COUNT}&splits=1&" + "&".join(
    f"{k}={v}" for k, v in GEN.items()
)
SPEC = Spec(bound=100, size=1_000, lateness=0)


def _status(state: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((state / "t1" / "jobmanager.json").read_bytes())
    return body


def _records_in(state: Path) -> int:
    return sum(w.get("records_in", 0) for w in _status(state)["workers"])


def _answer(client: Any, key: str) -> dict[str, Any] | None:
    r = client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"limit": 10_000})
    return r.json() if r.status_code == 200 else None


def test_api_process_killed_and_restarted_while_the_job_runs(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=SPEC.bound, size=SPEC.size,
                            lateness=SPEC.lateness))  # fmt: skip
    state = tmp_path / "state"
    run = weir_server(job, "--no-api", "--source", SOURCE, "--parallelism", "2",
                      "--checkpoint-interval-ms", "300", state_dir=state)  # fmt: skip
    api = weir_server(job, command="api", state_dir=state)
    client = api.client()

    def two_windows() -> dict[str, Any] | None:
        body = _answer(client, "ad-0")
        if not body or body["watermark"] is None:  # state can show before the status does
            return None
        return body if len(body["windows"]) >= 2 else None

    before = wait_until(two_windows, 30.0, what="ad-0 to have two windows")
    assert client.get("/health").json()["status"] == "ok"

    # kill -9 the API: the job does not notice
    os.kill(api.proc.pid, signal.SIGKILL)
    api.proc.wait(10)
    seen = _records_in(state)
    wait_until(lambda: _records_in(state) > seen, 10.0, what="records_in to keep rising")
    assert run.proc.poll() is None and _status(state)["state"] == "running"

    # a new API on the same port: answers at least as new as the last one's
    port = str(urlsplit(api.base_url).port)
    again = weir_server(job, "--api-port", port, command="api", state_dir=state)
    assert again.base_url == api.base_url
    client = again.client()
    after = wait_until(lambda: _answer(client, "ad-0"), 15.0, what="queries to resume")
    assert client.get("/jobs/t1").json()["state"] == "running"  # all of it while the job ran
    assert after["watermark"] >= before["watermark"]
    counts = {w["start"]: w["count"] for w in after["windows"]}
    for w in before["windows"]:
        assert counts[w["start"]] >= w["count"], w
    assert not (state / "t1" / f"api-{api.proc.pid}").exists()  # the dead API's files are gone

    # admin operations go to the job manager over the control channel
    r = client.post("/jobs/t1/savepoints")
    assert r.status_code == 200, r.text
    meta = json.loads((Path(r.json()["path"]) / "_metadata").read_text())
    assert meta["savepoint"] is True and meta["id"] == r.json()["id"]
    assert client.get("/jobs/t1").json()["last_checkpoint"] >= meta["id"]
    outside = {"op": "imps", "path": "/etc", "min_end": 0, "max_end": 1}
    refused = client.post("/jobs/t1/backfills", json=outside)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "path_refused"

    # the job's results: those of the model, as if the API had never been killed
    events = GeneratorSource(rate=0, count=COUNT, **GEN).open("0/1").read_batch(COUNT).items
    expected = simulate([json.dumps(e) for e in events], SPEC).state_by_key()
    wait_until(lambda: client.get("/jobs/t1").json()["state"] == "finished", 60.0,
               what="the job to finish")  # fmt: skip
    for key, windows in expected.items():
        body = _answer(client, key)
        assert body is not None and body["windows"] == windows, key
    assert _status(state)["restarts"] == 0
