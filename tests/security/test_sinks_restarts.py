"""What a restart does to the callers and outputs it meets (issue 17, item 9).

A savepoint asked for while a worker hangs fails as soon as a failure restarts the job, with an
error naming the restart, instead of waiting out its timeout (or the restart delay). A restart
without any checkpoint replays from the start and appends to the file outputs (at-least-once,
said in the log); it never truncates what the first attempt wrote.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.support import WeirServer, event_lines, make_events, wait_until, worker_pids, write_lines
from tests.support.reference import Spec, simulate

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
STALL_AT = 1_500  # the record a worker hangs on (a stuck call to an outside service)


def _a_worker(server: WeirServer) -> int:
    workers = worker_pids(server.proc.pid)
    assert len(workers) == 2, workers
    return workers[-1]


def test_a_restart_fails_a_pending_savepoint_at_once(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(3_000, seed=3)
    events[STALL_AT]["stall"] = True
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    stalled = tmp_path / "stalled"  # made as the reader hangs
    stall = (
        "filter",
        f"lambda e: ((open({str(stalled)!r}, 'w').close() or __import__('time').sleep(600)) "
        "if e.get('stall') else __import__('time').sleep(0.0005)) is None "
        "and e['event'] == 'impression'",
    )
    job = write_job(src, bound=200, size=1_000, lateness=1_500, steps=(stall,))
    server = weir_server(
        job, "--parallelism", "2", "--batch-size", "50", "--checkpoint-interval-ms", "600000",
        "--restart-failures", "2", "--restart-delay-ms", "30000",
    )  # fmt: skip
    c = server.client()

    def running() -> bool:
        body: dict[str, Any] = c.get(f"/jobs/{server.job}").json()
        return body["state"] == "running"

    # every worker has reported (the coordinator triggers the savepoint, or queues it behind the
    # first checkpoint, which the hung worker never acknowledges), and the reader hangs
    wait_until(running, 30.0, what="a running job")
    wait_until(stalled.exists, 30.0, what="the reader to hang on its record")
    answer: dict[str, Any] = {}

    def ask() -> None:
        with httpx.Client(base_url=server.base_url, timeout=60.0, trust_env=False) as client:
            r = client.post(f"/jobs/{server.job}/savepoints", params={"timeout_ms": 50_000})
            answer.update(status=r.status_code, body=r.json(), at=time.monotonic())

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    time.sleep(1.0)  # the request reaches the coordinator; with a worker hung it cannot complete
    killed_at = time.monotonic()
    os.kill(_a_worker(server), signal.SIGKILL)
    asking.join(10.0)
    assert answer, "the savepoint request was still waiting 10 s after the restart began"
    assert answer["at"] - killed_at < 5.0, answer
    assert answer["status"] == 409, answer
    message = answer["body"]["error"]["message"]
    assert re.search(r"restarting after a failure \(worker \d failed: process \d+ exited", message)


def test_a_restart_without_checkpoints_appends_and_never_truncates(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    lines = event_lines(make_events(4_000, seed=5))
    src = write_lines(tmp_path / "in.jsonl", lines)
    slow = (
        "filter",
        "lambda e: __import__('time').sleep(0.0005) is None and e['event'] == 'impression'",
    )
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=(slow,))
    out = tmp_path / "out.jsonl"
    server = weir_server(
        job, "--sink", f"file://{out}", "--parallelism", "2", "--batch-size", "100",
        "--restart-failures", "1", "--restart-delay-ms", "1000", "--exit-at-end",
    )  # fmt: skip
    wait_until(lambda: out.exists() and out.stat().st_size > 2_000, 30.0, what="some results")
    os.kill(_a_worker(server), signal.SIGKILL)
    wait_until(lambda: "restarting (attempt 1 of 1" in server.stderr(), 10.0, 0.01)
    time.sleep(0.3)  # the job manager kills the other worker too; then nothing writes
    before = out.read_bytes()
    before = before[: before.rfind(b"\n") + 1]  # a torn last line is all a restart may cut
    assert server.proc.wait(60) == 0, server.stderr()
    log = server.stderr()
    assert "restarting without a checkpoint" in log and "at-least-once" in log, log
    after = out.read_bytes()
    assert after.startswith(before), "the restart truncated what the first attempt wrote"
    replayed = [orjson.loads(line) for line in after[len(before) :].splitlines()]
    ref = simulate(lines, SPEC)
    assert len(replayed) == ref.emission_count  # the replay from the start wrote everything


def test_an_output_the_restart_cannot_rewind_fails_the_job_saying_why(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    lines = event_lines(make_events(4_000, seed=6))
    src = write_lines(tmp_path / "in.jsonl", lines)
    slow = (
        "filter",
        "lambda e: __import__('time').sleep(0.0005) is None and e['event'] == 'impression'",
    )
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=(slow,))
    out = tmp_path / "out.jsonl"
    server = weir_server(
        job, "--sink", f"file://{out}", "--parallelism", "2", "--batch-size", "100",
        "--restart-failures", "1", "--restart-delay-ms", "1000",
    )  # fmt: skip
    wait_until(lambda: out.exists() and out.stat().st_size > 0, 30.0, what="some results")
    os.kill(_a_worker(server), signal.SIGKILL)
    wait_until(lambda: "restarting (attempt 1 of 1" in server.stderr(), 10.0, 0.01)
    out.unlink()
    out.mkdir()  # where the output was, something no writer can open
    assert server.proc.wait(30) == 1, server.stderr()
    log = server.stderr()
    assert f"restart failed: cannot write sink file {out}: Is a directory" in log, log
    assert "weir: error: job t1 failed" in log and "Traceback" not in log, log
