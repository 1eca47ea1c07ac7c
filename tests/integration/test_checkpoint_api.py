"""Checkpoints seen from outside: the checkpoint list route and command, savepoints taken over
HTTP (and kept by retention), and committed reads that answer as of the latest checkpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import WeirResult, WeirServer, wait_until

LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=4000, ids=50), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def _counts(body: dict[str, Any]) -> dict[int, int]:
    return {w["start"]: w["n"] for w in body["windows"]}


def test_checkpoints_savepoints_and_committed_reads(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    state = tmp_path / "state"
    server = weir_server(
        job, "--parallelism", "2", "--checkpoint-interval-ms", "200", "--checkpoints-retained",
        "2", state_dir=state,
    )  # fmt: skip
    client = server.client()
    wait_until(
        lambda: (client.get("/jobs/live").json().get("last_checkpoint") or 0) >= 3,
        30.0,
        what="three checkpoints",
    )
    listed = client.get("/jobs/live/checkpoints").json()
    assert listed["storage"] == str((state / "checkpoints" / "live").resolve())
    ids = [c["id"] for c in listed["checkpoints"]]
    assert ids == sorted(ids, reverse=True) and 1 <= len(ids) <= 3  # 2 kept (+1 just written)
    for c in listed["checkpoints"]:
        assert c["parallelism"] == 2 and c["key_group_ranges"] == [[0, 63], [64, 127]]
        assert c["size"] > 0 and 0 <= c["incremental_size"] <= c["size"]
        assert c["sync_ms"] >= 0 and c["duration_ms"] >= c["sync_ms"]
        assert c["savepoint"] is False

    # committed reads: as of a checkpoint, never ahead of the live state
    live = client.get("/live/counts/state/ad-0").json()
    assert isinstance(live["checkpoint"], int)
    committed = client.get("/live/counts/state/ad-0", params={"consistency": "committed"})
    assert committed.status_code == 200, committed.text
    body = committed.json()
    assert body["consistency"] == "committed" and isinstance(body["checkpoint"], int)
    live_after = client.get("/live/counts/state/ad-0").json()
    assert body["checkpoint"] <= live_after["checkpoint"]
    assert isinstance(body["watermark"], int)  # the checkpoint's (the live one is reported
    # by workers every 100 ms, so it may trail a checkpoint taken since)
    for start, n in _counts(body).items():
        assert n <= _counts(live_after).get(start, n), start
    batch = client.post(
        "/live/counts/lookup", json={"keys": ["ad-0"], "consistency": "committed"}
    ).json()
    assert batch["results"][0]["consistency"] == "committed"

    # a savepoint over HTTP, by the command; retention never deletes it
    r = run_weir("savepoint", "live", "--api-url", server.base_url)
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("savepoint ") and "chk-" in r.stdout
    path = Path(r.stdout.split(": ", 1)[1].strip())
    meta = json.loads((path / "_metadata").read_text())
    assert meta["savepoint"] is True
    n = meta["id"]
    wait_until(
        lambda: (client.get("/jobs/live").json().get("last_checkpoint") or 0) >= n + 3,
        30.0,
        what="three more checkpoints",
    )
    assert (path / "_metadata").exists()
    ids = [c["id"] for c in client.get("/jobs/live/checkpoints").json()["checkpoints"]]
    assert n in ids and len(ids) <= 4
    table = run_weir("checkpoints", "live", "--state-dir", str(state))
    assert table.rc == 0, table.stderr
    assert "savepoint" in table.stdout and f"{n:>6}" in table.stdout
    as_json = json.loads(
        run_weir("checkpoints", "live", "--state-dir", str(state), "--json").stdout
    )
    assert [c["id"] for c in as_json] == sorted((c["id"] for c in as_json), reverse=True)


def test_savepoint_of_an_unknown_job_or_unreachable_api_is_a_clear_error(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    server = weir_server(job, "--parallelism", "1")
    r = run_weir("savepoint", "nope", "--api-url", server.base_url)
    assert r.rc == 1 and "404" in r.stderr and "nope" in r.stderr, r.stderr
    r = run_weir("savepoint", "live", "--api-url", "http://127.0.0.1:9")
    assert r.rc == 1 and "at http://127.0.0.1:9 failed: " in r.stderr, r.stderr
    assert "is the weir API running" in r.stderr
    r = run_weir("checkpoints", "live", "--state-dir", str(tmp_path / "none"))
    assert r.rc == 1 and "no complete checkpoint" in r.stderr
