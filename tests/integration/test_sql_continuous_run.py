"""A continuous aggregate view (``GROUP BY`` without a window, issue 43) in real ``weir run``
processes: at parallelism 1, 2 and 4 its upsert changelog in a file sink equals the brute-force
model's, per key; a kill -9 of a worker mid-run leaves the changelog exactly once, and so does a
kill -9 of the whole run restored at another parallelism (the rows rescale by key groups); the
current row of each key answers at ``/{job}/{view}/state/{key}`` (live and committed)."""

from __future__ import annotations

import json
import os
import signal
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.integration.test_checkpoints import FAST, _wait_checkpoint, crash_at_2_then_finish_at_3
from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    worker_pids,
    write_lines,
)
from weir.state.keygroups import canonical_key

JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources

job = Job("contagg", max_parallelism=128)
events = job.source(sources.jsonl(SOURCE), timestamp="ts",
                    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
events = events.filter(lambda e: SLOW)
job.sql("totals", "SELECT id, COUNT(*) AS n, SUM(`value`) AS total, MAX(`value`) AS top "
        "FROM events WHERE event = 'impression' GROUP BY id",
        tables={"events": events}, state_ttl_ms=0).sink(sinks.jsonl(OUT + "/totals.jsonl"))
"""
NOT_SLOW = "True"
SLOW = "time.sleep(0.0005) is None"  # ~0.5 ms a record: the kill lands mid-run


def job_file(tmp_path: Path, src: Path, slow: str = NOT_SLOW) -> Path:
    text = JOB.replace("SOURCE", repr(str(src))).replace("OUT", repr(str(tmp_path)))
    path = tmp_path / "job.py"
    path.write_text(text.replace("SLOW", slow), encoding="utf-8")
    return path


def model(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per key, the changelog by brute force: each impression emits its key's new row."""
    seen: dict[str, list[int]] = defaultdict(list)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["event"] != "impression":
            continue
        key = canonical_key(e["id"])
        values = seen[key]
        values.append(e["value"])
        op = "+I" if len(values) == 1 else "+U"
        row = {"op": "totals", "key": key, "row_kind": op, "id": e["id"], "n": len(values),
               "total": sum(values), "top": max(values)}  # fmt: skip
        out[key].append(row)
    return dict(out)


def changelog(path: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in read_jsonl(path):
        out[r["key"]].append(r)
    return dict(out)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_the_changelog_equals_the_model_and_the_rows_are_served(
    tmp_path: Path, weir_server: Callable[..., WeirServer], parallelism: int
) -> None:
    events = make_events(2_000, seed=parallelism)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    server = weir_server(
        job_file(tmp_path, src), "--parallelism", str(parallelism),
        "--checkpoint-interval-ms", "150", state_dir=tmp_path / "state",
    )  # fmt: skip
    server.wait_finished()
    want = model(events)
    assert changelog(tmp_path / "totals.jsonl") == want
    c = server.client()
    wait_until(lambda: (c.get("/jobs/contagg").json().get("last_checkpoint") or 0) > 0, 30.0,
               what="a checkpoint after the end")  # fmt: skip
    for key in ("ad-0", "a/b", "17"):
        last = {k: v for k, v in want[key][-1].items() if k not in ("op", "row_kind")}
        for consistency in ("live", "committed"):
            r = c.get(f"/contagg/totals/state/{quote(key, safe='')}",
                      params={"consistency": consistency})  # fmt: skip
            assert r.status_code == 200, r.text
            assert r.json()["state"]["row"] == last, consistency
    assert c.get("/contagg/totals/state/no-such-ad").status_code == 404


def test_the_changelog_is_exactly_once_across_a_kill_9_of_a_worker(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(5_000, seed=5)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    server = weir_server(
        job_file(tmp_path, src, SLOW), "--exit-at-end", "--parallelism", "2", *FAST,
        state_dir=tmp_path / "state",
    )  # fmt: skip
    _wait_checkpoint(server)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    assert "restarted from" in server.stderr()
    assert changelog(tmp_path / "totals.jsonl") == model(events)  # no row lost, none twice


def test_rows_restored_at_another_parallelism_rescale_exactly(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(5_000, seed=6)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    state, job = tmp_path / "state", job_file(tmp_path, src, SLOW)
    crash_at_2_then_finish_at_3(weir_server, job, state)
    assert changelog(tmp_path / "totals.jsonl") == model(events)


SQL_JOB = """
SET 'pipeline.name' = 'upserts';
CREATE TABLE events (id STRING, event STRING, ts BIGINT, `value` BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '200' MILLISECOND) WITH ('url' = 'file:///unused.jsonl');
SET 'table.exec.state.ttl' = '0';
CREATE VIEW totals AS
SELECT id, COUNT(*) AS n, SUM(`value`) AS total, MAX(`value`) AS top
FROM events WHERE event = 'impression' GROUP BY id;
"""


def test_a_kafka_sink_gets_an_upsert_topic_keyed_by_the_group_key(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_broker: str
) -> None:
    from tests.support.kafka_broker import create_topic, read_topic

    events = [{**e, "id": str(e["id"])} for e in make_events(1_500, seed=9)]
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    topic = f"upserts-{os.getpid()}"
    create_topic(kafka_broker, topic, 2)
    job = tmp_path / "job.sql"
    job.write_text(SQL_JOB)
    r = run_weir("sql", str(job), "--source", f"file://{src}", "--sink",
                 f"kafka://{kafka_broker}/{topic}", "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(tmp_path / "state"), "--parallelism", "2")  # fmt: skip
    assert r.rc == 0, r.stderr
    messages = read_topic(kafka_broker, topic)
    want = model(events)
    assert len(messages) == sum(len(rows) for rows in want.values())
    latest: dict[str, dict[str, Any]] = {}
    for m in messages:  # a key's messages share a partition, in order: compaction keeps the last
        body = json.loads(m.value)
        assert m.key.decode() == body["key"]
        latest[body["key"]] = body
    assert latest == {k: rows[-1] for k, rows in want.items()}
