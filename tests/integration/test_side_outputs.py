"""Side outputs of a process function through a real ``weir run`` at parallelism 2: a worker is
killed with SIGKILL mid-run, the run restarts from its latest checkpoint, and each side output
file holds every record exactly once (file outputs are cut back to the checkpoint's offsets and
the replay writes the rest again), the attached sink and the default file alike; an undeclared
tag's records are in the dead letters."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.integration.test_checkpoints import FAST, _wait_checkpoint
from tests.support import (
    WeirServer,
    alive,
    event_lines,
    make_events,
    read_jsonl,
    worker_pids,
    write_lines,
)
from tests.support.reference import canonical

N_EVENTS = 16_000

JOB = """
import time
from weir import Job, OutputTag, WatermarkStrategy, sinks, sources

ALERTS, AUDIT, NOWHERE = OutputTag("alerts"), OutputTag("audit"), OutputTag("nowhere")


def fraud(event, ctx):
    time.sleep(0.0004)  # a run of a few seconds: the kill lands in the middle of it
    seen = ctx.value("seen")
    seen.set(seen.get(0) + 1)
    if event["value"] >= 90:
        ctx.output(ALERTS, {"id": event["id"], "ts": ctx.timestamp, "value": event["value"]})
    if event["event"] == "click":
        ctx.output(AUDIT, {"id": event["id"], "ts": ctx.timestamp})
    if event["value"] == -50:
        ctx.output(NOWHERE, event)


job = Job("sides", max_parallelism=128)
result = (
    job.source(sources.jsonl(SOURCE), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .process(fraud, name="fraud")
)
result.side_output(ALERTS).sink(sinks.jsonl(ALERTS_OUT))
result.side_output(AUDIT)  # no sink: <state-dir>/sides/side-fraud-audit.jsonl
"""


def test_side_outputs_are_exactly_once_across_a_kill_9_of_a_worker(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(N_EVENTS, seed=11)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    alerts_out, state = tmp_path / "alerts.jsonl", tmp_path / "state"
    job = tmp_path / "job.py"
    text = JOB.replace("SOURCE", repr(str(src))).replace("ALERTS_OUT", repr(str(alerts_out)))
    job.write_text(text, encoding="utf-8")
    server = weir_server(
        job, "--exit-at-end", "--parallelism", "2", *FAST, "--sink", f"file://{tmp_path}/o.jsonl",
        state_dir=state,
    )  # fmt: skip
    _wait_checkpoint(server)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    stderr = server.stderr()
    assert "restarting (attempt 1 of 3)" in stderr and "restarted from" in stderr, stderr
    assert not alive(victim)

    want_alerts = [
        {"id": e["id"], "ts": e["ts"], "value": e["value"]} for e in events if e["value"] >= 90
    ]
    want_audit = [{"id": e["id"], "ts": e["ts"]} for e in events if e["event"] == "click"]
    assert canonical(read_jsonl(alerts_out)) == canonical(want_alerts)  # no loss, no duplicate
    audit = read_jsonl(state / "sides" / "side-fraud-audit.jsonl")
    assert canonical(audit) == canonical(want_audit)
    dead = read_jsonl(state / "sides" / "dead-letter.jsonl")
    undeclared = [d for d in dead if d["stage"] == "side_output:fraud"]
    assert canonical(d["input"] for d in undeclared) == canonical(
        e for e in events if e["value"] == -50
    )
    assert "not a side output of 'fraud'" in undeclared[0]["reason"]
