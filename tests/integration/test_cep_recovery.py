"""A pattern job in real ``weir run`` processes, against an uninterrupted run of the same input
(a file: one split, out-of-order, late events included): a kill -9 of a worker mid-run leaves
its matches, timed-out partial matches and late events exactly once, and so does a rescale
from savepoints, parallelism 1 -> 2 -> 1 (each stop lands mid-input; the queues, NFA runs
and shared buffers move by key groups)."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.test_checkpoints import FAST, _wait_checkpoint
from tests.support import (
    WeirResult,
    WeirServer,
    alive,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    worker_pids,
    write_lines,
)

JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources
from weir.engine.cep import AfterMatchSkipStrategy, Pattern

job = Job("cepr", max_parallelism=128)
ads = job.source(sources.jsonl(SOURCE), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
pattern = (
    Pattern.begin("seen", AfterMatchSkipStrategy.skip_past_last_event())
    .where(lambda e: e["event"] == "impression")
    .followed_by("again").where(lambda e: e["event"] == "impression")
    .followed_by("clicked").where(lambda e: e["event"] == "click")
    .within(300)
)
(ads.filter(lambda e: SLOW)
    .key_by("id").pattern(pattern)
    .select(lambda m: {"events": [[e["ts"], e["value"], e["event"]]
                                  for name in ("seen", "again", "clicked") for e in m[name]]},
            name="clicked")
    .sink(sinks.jsonl(OUT + "/matches.jsonl")))
"""
NOT_SLOW = "True"
SLOW = "time.sleep(0.0004) is None"  # ~0.4 ms a record: a kill or a stop lands mid-run
JOB_NAME, OP = "cepr", "clicked"


def job_file(out: Path, src: Path, slow: str) -> Path:
    text = JOB.replace("SOURCE", repr(str(src))).replace("OUT", repr(str(out)))
    path = out / "job.py"
    path.write_text(text.replace("SLOW", slow), encoding="utf-8")
    return path


def outcome(out: Path, state: Path) -> dict[str, Counter[str]]:
    """Matches, timed-out partial matches and late events, each as a multiset."""

    def bag(records: list[dict[str, Any]]) -> Counter[str]:
        return Counter(json.dumps(r, sort_keys=True) for r in records)

    job_dir = state / JOB_NAME
    return {
        "matches": bag(read_jsonl(out / "matches.jsonl")),
        "timed-out": bag(read_jsonl(job_dir / f"side-{OP}-timed-out.jsonl")),
        "late": bag(read_jsonl(job_dir / f"side-{OP}-late.jsonl")),
    }


def reference(
    tmp_path: Path, src: Path, weir_server: Callable[..., WeirServer]
) -> dict[str, Counter[str]]:
    out = tmp_path / "reference"
    out.mkdir()
    state = out / "state"
    server = weir_server(job_file(out, src, NOT_SLOW), "--exit-at-end", state_dir=state)
    assert server.proc.wait(120) == 0, server.stderr()
    found = outcome(out, state)
    assert sum(found["matches"].values()) > 50, "the input must make matches"
    assert sum(found["timed-out"].values()) > 50 and found["late"]
    return found


def test_a_pattern_job_is_exactly_once_across_a_kill_9_of_a_worker(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(8_000, seed=21)))
    want = reference(tmp_path, src, weir_server)
    out = tmp_path / "killed"
    out.mkdir()
    state = out / "state"
    server = weir_server(job_file(out, src, SLOW), "--exit-at-end", "--parallelism", "2",
                         *FAST, state_dir=state)  # fmt: skip
    _wait_checkpoint(server)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    assert "restarted from" in server.stderr()
    assert not alive(victim)
    assert outcome(out, state) == want  # nothing lost, nothing twice


def _records_in(server: WeirServer) -> int:
    body: dict[str, Any] = server.client().get(f"/jobs/{server.job}").json()
    assert body["state"] in ("starting", "running"), f"the stop must land mid-input: {body}"
    return int(body["records_in"])


def _stop_with_savepoint(
    server: WeirServer, state: Path, run_weir: Callable[..., WeirResult], after: int
) -> Path:
    wait_until(lambda: _records_in(server) >= after, 60.0, what=f"{after} records read")
    r = run_weir("stop", JOB_NAME, "--savepoint", "--state-dir", str(state), "--json")
    assert r.rc == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["state"] == "stopped", answer
    assert server.proc.wait(30) == 0, server.stderr()
    path = Path(answer["savepoint"]["path"])
    meta = json.loads((path / "_metadata").read_text())
    (position,) = [p for w in meta["workers"] for p in w["sources"].values()]
    assert not position["ended"], "the stop must land mid-input: slow the job down"
    return path


def test_a_pattern_job_rescaled_1_2_1_from_savepoints_is_exactly_once(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(12_000, seed=22)))
    want = reference(tmp_path, src, weir_server)
    out = tmp_path / "rescaled"
    out.mkdir()
    state, job = out / "state", job_file(out, src, SLOW)
    flags = ("--batch-size", "256")
    first = weir_server(job, *flags, "--parallelism", "1", state_dir=state)
    one = _stop_with_savepoint(first, state, run_weir, after=2_000)
    second = weir_server(job, *flags, "--parallelism", "2", "--restore", str(one),
                         state_dir=state)  # fmt: skip
    assert "restored from" in wait_until(
        lambda: "restored from" in second.stderr() and second.stderr(), 30.0
    )
    two = _stop_with_savepoint(second, state, run_weir, after=2_000)
    third = weir_server(job, *flags, "--parallelism", "1", "--restore", str(two),
                        "--exit-at-end", state_dir=state)  # fmt: skip
    assert third.proc.wait(120) == 0, third.stderr()
    assert outcome(out, state) == want
