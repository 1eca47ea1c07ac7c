"""``weir backfill`` on a real local SparkSession (the session's, run in-process: the command's
code without a JVM of its own, ``tests.support.backfill``): the same JSONL events through the
Spark backfill and through ``weir run`` give identical windows per key; a live backfill puts
historical windows next to the running job's at the same endpoint; overlapping windows are
refused and nothing is counted twice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    job_text,
    make_events,
    read_jsonl,
    write_lines,
)
from tests.support.backfill import backfill_in_process
from tests.support.reference import group_emissions

SIZE, BOUND, LATENESS = 1_000, 200, 1_500
AGGS = ("count", "total", "lo", "hi", "avg")


def _windows_via_api(server: WeirServer, keys: set[str]) -> dict[tuple[str, int, int], Any]:
    client = server.client()
    got: dict[tuple[str, int, int], Any] = {}
    for key in sorted(keys):
        r = client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"limit": 10_000})
        assert r.status_code == 200, (key, r.text)
        for w in r.json()["windows"]:
            got[(key, w["start"], w["end"])] = {a: w[a] for a in AGGS}
    return got


def _backfill(spark: Any, job: Path, src: Path, *flags: str) -> WeirResult:
    return backfill_in_process(spark, job.parent, str(job), "--input", str(src), *flags)


def test_backfill_and_streaming_give_identical_windows(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    weir_server: Callable[..., WeirServer],
    spark: Any,
) -> None:
    lines = event_lines(make_events(3_000, seed=81))
    src = write_lines(tmp_path / "history.jsonl", lines)
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=BOUND, size=SIZE, lateness=LATENESS))
    out = tmp_path / "stream-out.jsonl"
    r = run_weir("run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(tmp_path / "stream-state"))  # fmt: skip
    assert r.rc == 0, r.stderr
    streamed = {k: {a: v[-1][a] for a in AGGS} for k, v in group_emissions(read_jsonl(out)).items()}
    late = len(read_jsonl(tmp_path / "stream-state" / "t1" / "late.jsonl"))
    assert late >= 20  # the input has late records, which both must leave out alike

    r = _backfill(spark, job, src, "--into-savepoint", str(tmp_path / "sp"))
    assert r.rc == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["backfill"]["imps"]["late"] == late
    assert summary["backfill"]["imps"]["windows"] == len(streamed)
    savepoint = summary["savepoint"]
    assert json.loads((Path(savepoint) / "_metadata").read_text())["savepoint"] is True

    empty = write_lines(tmp_path / "empty.jsonl", [])
    server = weir_server(job, "--restore", savepoint, "--source", f"file://{empty}",
                         "--parallelism", "2", state_dir=tmp_path / "restored")  # fmt: skip
    server.wait_finished()
    backfilled = _windows_via_api(server, {k for k, _, _ in streamed})
    assert backfilled == streamed


def test_live_backfill_serves_history_beside_live_windows_and_refuses_overlap(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    weir_server: Callable[..., WeirServer],
    spark: Any,
) -> None:
    history = make_events(2_000, seed=82)  # event times from about -3 s to 7 s
    live = make_events(800, seed=83, start=60_000)  # a minute later
    hist_src = write_lines(tmp_path / "history.jsonl", event_lines(history))
    live_src = write_lines(tmp_path / "live.jsonl", event_lines(live))
    job = tmp_path / "job.py"
    job.write_text(job_text(live_src, bound=BOUND, size=SIZE, lateness=0))
    server = weir_server(job, "--parallelism", "2", "--state-retention-ms", "86400000")
    server.wait_finished()
    client = server.client()
    before = client.get("/t1/imps/state/ad-0", params={"limit": 10_000}).json()["windows"]
    assert before and min(w["start"] for w in before) >= 50_000

    r = _backfill(spark, job, hist_src, "--live", server.base_url)
    assert r.rc == 0, r.stderr[-3000:]
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded["live"]["imps"]["windows"] == loaded["backfill"]["imps"]["windows"] > 0
    after = client.get("/t1/imps/state/ad-0", params={"limit": 10_000}).json()["windows"]
    old = [w for w in after if w["start"] < 50_000]
    assert old and [w for w in after if w["start"] >= 50_000] == before
    # the historical windows equal what streaming the history computes
    hist_job = tmp_path / "hist_job.py"
    hist_job.write_text(job_text(hist_src, bound=BOUND, size=SIZE, lateness=0))
    out = tmp_path / "hist-out.jsonl"
    r2 = run_weir("run", str(hist_job), "--sink", f"file://{out}", "--exit-at-end",
                  "--api-port", "0", "--state-dir", str(tmp_path / "hist-state"))  # fmt: skip
    assert r2.rc == 0, r2.stderr
    want = {
        (s["start"], s["end"]): s["count"]
        for (key, _, _), v in group_emissions(read_jsonl(out)).items()
        for s in [v[-1]]
        if key == "ad-0"
    }
    assert {(w["start"], w["end"]): w["count"] for w in old} == want
    jobs = client.get("/jobs/t1").json()
    assert len(jobs["backfills"]) == 1 and jobs["backfills"][0]["op"] == "imps"

    # the same history again overlaps windows the job now holds: refused, nothing doubled
    r = _backfill(spark, job, hist_src, "--live", server.base_url)
    assert r.rc == 2 and "backfill refused" in r.stderr and "already has the window" in r.stderr
    again = client.get("/t1/imps/state/ad-0", params={"limit": 10_000}).json()["windows"]
    assert again == after
