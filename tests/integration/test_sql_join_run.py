"""A SQL interval join (issue 43) in real ``weir run`` processes: its pairs equal the brute-force
model's (``tests/support/join_reference.py``, late records included) at parallelism 2, and stay
exactly once across a kill -9 of a worker mid-run (the SQL view compiles onto the job API's
interval join, whose buffers are checkpointed keyed state)."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_checkpoints import FAST, _wait_checkpoint
from tests.integration.test_joins import arrivals_of
from tests.support import (
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    worker_pids,
    write_lines,
)
from tests.support.join_reference import interval_join

LOWER, UPPER = -150, 60  # test_joins' bounds, with its watermark bound of 200 ms
JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources

job = Job("sqljoin", max_parallelism=128)
ads = job.source(sources.jsonl(SOURCE), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
ads = ads.filter(lambda e: SLOW)
job.sql("clicked", "SELECT i.ts AS lts, i.`value` AS lv, c.ts AS rts, c.`value` AS rv "
        "FROM ads AS i JOIN ads AS c ON i.id = c.id "
        "AND c.ts BETWEEN i.ts - INTERVAL '150' MILLISECOND AND i.ts + INTERVAL '60' MILLISECOND "
        "WHERE i.event = 'impression' AND c.event = 'click'",
        tables={"ads": ads}).sink(sinks.jsonl(OUT + "/pairs.jsonl"))
"""
SLOW = "time.sleep(0.0005) is None"


def _job(tmp_path: Path, src: Path, slow: str) -> Path:
    text = JOB.replace("SOURCE", repr(str(src))).replace("OUT", repr(str(tmp_path)))
    path = tmp_path / "job.py"
    path.write_text(text.replace("SLOW", slow), encoding="utf-8")
    return path


def _want(events: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    pairs, late = interval_join(arrivals_of(events), LOWER, UPPER)
    assert sum(pairs.values()) > 300 and late
    out: Counter[tuple[Any, ...]] = Counter()
    for (_, left, right, _), n in pairs.items():
        lrec, rrec = dict(left), dict(right)
        out[(lrec["ts"], lrec["value"], rrec["ts"], rrec["value"])] += n
    return out


def _got(path: Path) -> Counter[tuple[Any, ...]]:
    return Counter((r["lts"], r["lv"], r["rts"], r["rv"]) for r in read_jsonl(path))


@pytest.mark.parametrize("kill", [False, True], ids=["plain", "kill-9"])
def test_the_sql_join_is_exactly_the_models_pairs(
    tmp_path: Path, weir_server: Callable[..., WeirServer], kill: bool
) -> None:
    events = make_events(6_000, seed=11)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    server = weir_server(
        _job(tmp_path, src, SLOW if kill else "True"), "--exit-at-end", "--parallelism", "2",
        *FAST, state_dir=tmp_path / "state",
    )  # fmt: skip
    if kill:
        _wait_checkpoint(server)
        victim = worker_pids(server.proc.pid)[1]
        os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    if kill:
        assert "restarted from" in server.stderr()
    assert _got(tmp_path / "pairs.jsonl") == _want(events)  # no pair lost, none twice
