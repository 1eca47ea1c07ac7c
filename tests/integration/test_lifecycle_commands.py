"""``weir list``, ``weir stop [--savepoint]`` and ``weir cancel`` against real ``weir run``
processes, over the job manager's control channel.

A stop-with-savepoint lands in the middle of a bounded input (a slowed filter); a run restored
from its savepoint appends to the same file sink, and the two runs' results together are the
brute-force model's, every emission of every ``(key, start, end)`` exactly once: nothing emitted
before the stop is emitted again. A savepoint that fails (a worker declines) leaves the job
running, its sources reading again. A cancel ends an unbounded job at once, and ``--restore
latest`` resumes it from its last checkpoint.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import (
    WeirResult,
    WeirServer,
    alive,
    chk_dir,
    descendants,
    event_lines,
    job_text,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.reference import Spec, canonical, group_emissions, simulate
from weir.engine.runtime.control import status
from weir.engine.runtime.view import STATUS_FORMAT, JobStatus
from weir.state.checkpoints import CheckpointStorage, now_ms

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
N_EVENTS = 20_000
# the model's filter, slowed (~0.2 ms a record) so that the stop lands in the middle of the input
SLOW_IMPRESSIONS = (
    (
        "filter",
        "lambda e: __import__('time').sleep(0.0002) is None and e['event'] == 'impression'",
    ),
)
GENERATOR = "generator://ads?rate=2000&ids=5&seed=1&clock=synthetic&disorder=50"
STATE = "t1"  # the job's name in job_text


def _jobs(run_weir: Callable[..., WeirResult], state: Path) -> dict[str, dict[str, Any]]:
    r = run_weir("list", "--state-dir", str(state), "--json")
    assert r.rc == 0, r.stderr
    return {j["job"]: j for j in json.loads(r.stdout)}


def _records_in(server: WeirServer) -> int:
    body: dict[str, Any] = server.client().get(f"/jobs/{server.job}").json()
    assert body["state"] in ("starting", "running"), body
    return int(body["records_in"])


def _generator_job(tmp_path: Path) -> Path:
    path = tmp_path / "gen_job.py"
    path.write_text(job_text(tmp_path / "unused.jsonl", bound=100, size=500, lateness=0))
    return path


def test_stop_with_savepoint_then_restore_emits_every_result_exactly_once(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    lines = event_lines(make_events(N_EVENTS, seed=11))
    ref = simulate(lines, SPEC)
    assert len(ref.late) >= 20 and sum(len(v) > 2 for v in ref.emissions.values()) >= 10
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(
        src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=SLOW_IMPRESSIONS
    )
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    flags = ("--sink", f"file://{out}", "--parallelism", "2", "--batch-size", "256")
    first = weir_server(job, *flags, state_dir=state)
    wait_until(lambda: _records_in(first) >= 2_000, 30.0, what="a tenth of the input read")
    listed = _jobs(run_weir, state)[STATE]
    assert listed["state"] == "running" and listed["api_url"] == first.base_url
    assert listed["pid"] == first.proc.pid and listed["parallelism"] == 2

    r = run_weir("stop", STATE, "--savepoint", "--state-dir", str(state), "--json")
    assert r.rc == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["job"] == STATE and answer["state"] == "stopped", answer
    path = Path(answer["savepoint"]["path"])
    assert path.name == f"chk-{answer['savepoint']['id']}" and (path / "_metadata").is_file()
    assert first.proc.wait(20) == 0, first.stderr()
    assert f"stopped with savepoint={answer['savepoint']['id']}" in first.stderr()
    ended = _jobs(run_weir, state)[STATE]
    assert ended["state"] == "stopped" and ended["api_url"] is None
    meta = json.loads((path / "_metadata").read_text())
    (position,) = [p for w in meta["workers"] for p in w["sources"].values()]
    assert not position["ended"], "the stop must land mid-input: slow the job down"
    finals_before = sum(r["final"] for r in read_jsonl(out))
    assert 0 < finals_before < sum(e[-1]["final"] for e in ref.emissions.values())

    second = weir_server(job, *flags, "--restore", str(path), "--exit-at-end", state_dir=state)
    assert second.proc.wait(90) == 0, second.stderr()
    got = group_emissions(read_jsonl(out))
    differ = [k for k in ref.emissions if got.get(k) != ref.emissions[k]]
    assert not differ, f"{len(differ)} windows differ, e.g. {differ[:3]}"
    assert set(got) == set(ref.emissions)
    assert all(sum(e["final"] for e in emitted) == 1 for emitted in got.values())
    assert canonical(read_jsonl(state / STATE / "late.jsonl")) == canonical(ref.late)


def test_a_failed_stop_with_savepoint_leaves_the_job_reading(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    state = tmp_path / "state"
    server = weir_server(
        _generator_job(tmp_path), "--source", GENERATOR, "--parallelism", "2", state_dir=state
    )
    wait_until(lambda: _records_in(server) > 0, 20.0, what="records to flow")
    # checkpoint 1's directory is taken by a file: every worker's upload fails, after its
    # barrier stopped its sources
    blocker = chk_dir(CheckpointStorage(state / "checkpoints", STATE), 1)
    blocker.parent.mkdir(parents=True, exist_ok=True)  # the job lease lives there too
    blocker.write_text("not a checkpoint directory")

    r = run_weir("stop", STATE, "--savepoint", "--state-dir", str(state))
    assert r.rc == 1, r.stderr
    assert "stop-with-savepoint of job 't1' failed: worker" in r.stderr
    assert "declined: upload failed" in r.stderr and "the job goes on" in r.stderr
    after = _records_in(server)
    wait_until(lambda: _records_in(server) > after + 1_000, 20.0, what="the sources to read again")
    assert _jobs(run_weir, state)[STATE]["state"] == "running"

    blocker.unlink()
    copies = tmp_path / "copies"
    r = run_weir(
        "stop", STATE, "--savepoint", "--savepoint-dir", str(copies), "--state-dir", str(state)
    )
    assert r.rc == 0, r.stderr
    copy = copies / STATE / "chk-2"
    assert r.stdout.strip() == f"job t1 stopped with savepoint 2: {copy.resolve()}"
    assert server.proc.wait(20) == 0, server.stderr()
    assert CheckpointStorage(copies, STATE).problem(2) is None  # every file, size and CRC

    restored = weir_server(
        _generator_job(tmp_path), "--source", GENERATOR, "--restore", str(copy), state_dir=state
    )
    wait_until(lambda: _records_in(restored) > 0, 20.0, what="the restored job to read")
    restored_from = restored.client().get("/jobs/t1/checkpoints").json()["restored_from"]
    assert restored_from == str(copy.resolve())


def test_cancel_ends_at_once_and_restore_latest_resumes_from_the_last_checkpoint(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    state = tmp_path / "state"
    job = _generator_job(tmp_path)
    flags = ("--source", GENERATOR, "--parallelism", "2", "--checkpoint-interval-ms", "200")
    server = weir_server(job, *flags, state_dir=state)
    client = server.client()
    wait_until(
        lambda: (client.get("/jobs/t1").json()["last_checkpoint"] or 0) >= 2,
        30.0,
        what="two checkpoints",
    )
    workers = descendants(server.proc.pid)
    key = state / STATE / "control.key"
    key.rename(key.with_name("elsewhere"))
    r = run_weir("cancel", STATE, "--state-dir", str(state))
    assert r.rc == 2 and "cannot read the job manager's control key" in r.stderr, r.stderr
    assert "run this command as the user running weir run, with the same --state-dir" in r.stderr
    key.with_name("elsewhere").rename(key)

    began = time.monotonic()
    r = run_weir("cancel", STATE, "--state-dir", str(state), "--json")
    assert r.rc == 0, r.stderr
    answer = json.loads(r.stdout)
    n = answer["last_checkpoint"]
    assert answer == {"job": STATE, "state": "cancelled", "last_checkpoint": n} and n >= 2
    assert server.proc.wait(10) == 0, server.stderr()
    assert time.monotonic() - began < 10.0, "a cancel must end the job promptly"
    wait_until(lambda: not any(alive(w) for w in workers), 5.0, what="the workers to be gone")
    assert f"job t1 cancelled; weir run --restore latest resumes from checkpoint {n}" in (
        server.stderr()
    )
    assert _jobs(run_weir, state)[STATE]["state"] == "cancelled"

    again = weir_server(job, *flags, "--restore", "latest", state_dir=state)
    wait_until(lambda: _records_in(again) > 0, 20.0, what="the restored job to read")
    restored_from = again.client().get("/jobs/t1/checkpoints").json()["restored_from"]
    assert restored_from == str(chk_dir(CheckpointStorage(state / "checkpoints", STATE), n))
    r = run_weir("stop", STATE, "--state-dir", str(state), "--json")
    assert r.rc == 0, r.stderr
    assert json.loads(r.stdout) == {"job": STATE, "savepoint": None, "state": "stopped"}
    assert again.proc.wait(20) == 0, again.stderr()
    assert _jobs(run_weir, state)[STATE]["state"] == "stopped"


def _status(job: str, state: str, *, age_s: float = 0.0, ended: bool = False) -> JobStatus:
    return JobStatus(
        format=STATUS_FORMAT, job=job, run_id="r1", pid=os.getpid(),
        written_at=now_ms() - int(age_s * 1000), state=state, failure=None, source="file:///x",
        operators=["imps"], parallelism=3, max_parallelism=128, ranges=[], generation=0,
        restarts=0, last_checkpoint=4, completed_checkpoints=1, checkpoints=[],
        checkpoint_problem=None, restored_from=None, backfills=[], workers=[],
        control_port=None if ended else 1, api_url=None, cluster=False, ended=ended,
    )  # fmt: skip


def _publish(state: Path, st: JobStatus) -> None:
    (state / st.job).mkdir(parents=True)
    status.write_status(status.status_path(state / st.job), st)


def test_list_shows_each_jobs_state_and_the_errors_name_the_fix(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    state = tmp_path / "state"
    for where in (state, tmp_path / "nowhere"):
        r = run_weir("list", "--state-dir", str(where), "--json")
        assert (r.rc, json.loads(r.stdout)) == (0, [])
    state.mkdir()
    r = run_weir("list", "--state-dir", str(state))
    assert r.rc == 0 and f"no jobs under {state}" in r.stderr
    _publish(state, _status("gone", "running", age_s=30.0))
    _publish(state, _status("done", "stopped", age_s=600.0, ended=True))
    (state / "odd").mkdir()
    status.status_path(state / "odd").write_text('{"format": 99}')
    (state / "checkpoints").mkdir()  # no status file: not a job

    jobs = _jobs(run_weir, state)
    assert list(jobs) == ["done", "gone", "odd"]
    assert jobs["gone"]["state"] == "unknown" and jobs["gone"]["status_age_s"] >= 30.0
    assert jobs["done"]["state"] == "stopped" and jobs["done"]["last_checkpoint"] == 4
    assert jobs["odd"]["state"] == "unknown" and "has format 99" in jobs["odd"]["problem"]
    table = run_weir("list", "--state-dir", str(state)).stdout.splitlines()
    assert table[0].split() == [
        "job", "state", "pid", "api", "workers", "checkpoint", "status", "age",
    ]  # fmt: skip
    assert table[1].split()[:6] == ["done", "stopped", str(os.getpid()), "-", "3", "4"]
    assert table[1].endswith("10 min")

    r = run_weir("stop", "nope", "--state-dir", str(state))
    assert r.rc == 2 and f"no job 'nope' under {state} (jobs there: done, gone, odd)" in r.stderr
    r = run_weir("cancel", "gone", "--state-dir", str(state))
    assert r.rc == 1 and "job 'gone' is not running: its job manager" in r.stderr
    assert "is weir run still running?" in r.stderr
    r = run_weir("stop", "done", "--savepoint", "--state-dir", str(state))
    assert r.rc == 1 and "job 'done' is not running: it stopped" in r.stderr
    r = run_weir("stop", "done", "--savepoint-dir", "x", "--state-dir", str(state))
    assert r.rc == 2 and "pass --savepoint too" in r.stderr
    r = run_weir("stop", "done", "--timeout-s", "0", "--state-dir", str(state))
    assert r.rc == 2 and "--timeout-s='0' is too small" in r.stderr
    r = run_weir("cancel", "../x", "--state-dir", str(state))
    assert r.rc == 2 and "job name '../x' is not allowed" in r.stderr
