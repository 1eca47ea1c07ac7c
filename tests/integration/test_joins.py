"""Both joins in real ``weir run`` processes: one job holds a window join and an interval join of
the impressions and clicks of one ad stream (a file: one split, late records included); at
parallelism 1, 2 and 4 each join's output and late records equal the brute-force model's
(``tests/support/join_reference.py``); a kill -9 of a worker mid-run leaves the output exactly
once, and so does a kill -9 of the whole run restored at another parallelism (the buffers rescale
by key groups); a running join's buffers answer at ``/{job}/{name}/state/{key}``."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_checkpoints import FAST, _wait_checkpoint, crash_at_2_then_finish_at_3
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
from tests.support.join_reference import MIN_TIME, Arrival, freeze, interval_join, window_join

BOUND, SIZE, LOWER, UPPER = 200, 500, -150, 60

JOB = """
import time
from weir import Job, WatermarkStrategy, sinks, sources, windows

job = Job("joins", max_parallelism=128)
ads = job.source(sources.jsonl(SOURCE), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=BOUND))
impressions = ads.filter(lambda e: SLOW or e["event"] == "impression")
clicks = ads.filter(lambda e: e["event"] == "click")
(impressions.join(clicks).where("id").equal_to("id")
    .window(windows.tumbling(ms=SIZE))
    .apply(name="wjoin")
    .sink(sinks.jsonl(OUT + "/wjoin.jsonl")))
(impressions.key_by("id").interval_join(clicks.key_by("id"))
    .between(LOWER, UPPER)
    .process(name="ijoin")
    .sink(sinks.jsonl(OUT + "/ijoin.jsonl")))
"""
NOT_SLOW = "False"
SLOW = "time.sleep(0.0005) is not None"  # ~0.5 ms a record: the kill lands mid-run


def job_file(tmp_path: Path, src: Path, slow: str = NOT_SLOW) -> Path:
    text = JOB
    for name, value in (("SOURCE", repr(str(src))), ("OUT", repr(str(tmp_path))),
                        ("BOUND", str(BOUND)), ("SIZE", str(SIZE)), ("LOWER", str(LOWER)),
                        ("UPPER", str(UPPER)), ("SLOW", slow)):  # fmt: skip
        text = text.replace(name, value)
    path = tmp_path / "job.py"
    path.write_text(text, encoding="utf-8")
    return path


def arrivals_of(events: list[dict[str, Any]]) -> list[Arrival]:
    """The file is one split: each record arrives under the split's watermark before it."""
    out, top = [], MIN_TIME
    for e in events:
        wm = MIN_TIME if top == MIN_TIME else top - BOUND - 1
        out.append(Arrival("right" if e["event"] == "click" else "left", e["id"], e["ts"], wm, e))
        top = max(top, e["ts"])
    return out


def window_pairs(records: list[dict[str, Any]]) -> Counter[Any]:
    return Counter((r["start"], r["end"], freeze(r["left"]), freeze(r["right"])) for r in records)


def interval_pairs(records: list[dict[str, Any]]) -> Counter[Any]:
    return Counter((freeze(r["left"]), freeze(r["right"]), r["ts"]) for r in records)


def late_of(records: list[dict[str, Any]]) -> Counter[Any]:
    return Counter((r["side"], freeze(r["record"])) for r in records)


def assert_equals_the_model(events: list[dict[str, Any]], out: Path, state: Path) -> None:
    arrivals = arrivals_of(events)
    w_ref, w_late = window_join(arrivals, SIZE)
    i_ref, i_late = interval_join(arrivals, LOWER, UPPER)
    assert sum(w_ref.values()) > 1_000 and sum(i_ref.values()) > 300 and w_late and i_late
    assert window_pairs(read_jsonl(out / "wjoin.jsonl")) == Counter(
        {k[1:]: n for k, n in w_ref.items()}
    )
    assert interval_pairs(read_jsonl(out / "ijoin.jsonl")) == Counter(
        {(k[1], k[2], k[3]): n for k, n in i_ref.items()}
    )
    job_dir = state / "joins"
    assert late_of(read_jsonl(job_dir / "side-wjoin-late.jsonl")) == late_of(
        [{"side": a.side, "record": a.rec} for a in w_late]
    )
    assert late_of(read_jsonl(job_dir / "side-ijoin-late.jsonl")) == late_of(
        [{"side": a.side, "record": a.rec} for a in i_late]
    )


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_both_joins_equal_the_model_at_parallelism(
    tmp_path: Path, weir_server: Callable[..., WeirServer], parallelism: int
) -> None:
    events = make_events(3_000, seed=parallelism)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    state = tmp_path / "state"
    server = weir_server(
        job_file(tmp_path, src), "--exit-at-end", "--parallelism", str(parallelism),
        state_dir=state,
    )  # fmt: skip
    assert server.proc.wait(120) == 0, server.stderr()
    assert_equals_the_model(events, tmp_path, state)


def test_joins_are_exactly_once_across_a_kill_9_of_a_worker(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(6_000, seed=5)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    state = tmp_path / "state"
    server = weir_server(
        job_file(tmp_path, src, SLOW), "--exit-at-end", "--parallelism", "2", *FAST,
        state_dir=state,
    )  # fmt: skip
    _wait_checkpoint(server)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    assert "restarted from" in server.stderr()
    assert not alive(victim)
    assert_equals_the_model(events, tmp_path, state)  # no pair lost, none twice


def test_join_buffers_restored_at_another_parallelism_rescale_exactly(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events = make_events(6_000, seed=6)
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    state, job = tmp_path / "state", job_file(tmp_path, src, SLOW)
    crash_at_2_then_finish_at_3(weir_server, job, state)
    assert_equals_the_model(events, tmp_path, state)


LIVE_JOB = """
from weir import Job, WatermarkStrategy, sources

job = Job("live-joins", max_parallelism=128)
ads = job.source(sources.generator("ads", rate=400, ids=3, seed=3), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
(ads.filter(lambda e: e["event"] == "impression").key_by("id")
    .interval_join(ads.filter(lambda e: e["event"] == "click").key_by("id"))
    .between(-60_000, 60_000)
    .process(name="clicked"))
"""


def test_a_running_joins_buffers_answer_over_http(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    path = tmp_path / "live.py"
    path.write_text(LIVE_JOB, encoding="utf-8")
    server = weir_server(path, "--parallelism", "2", state_dir=tmp_path / "state")
    c = server.client()

    def buffered() -> dict[str, Any] | None:
        r = c.get("/live-joins/clicked/state/ad-0")
        body: dict[str, Any] = r.json()
        ok = r.status_code == 200 and body["state"].get("left") and body["state"].get("right")
        return body if ok else None

    body = wait_until(buffered, 30.0, what="both buffers of ad-0")
    assert body["op"] == "clicked" and body["key"] == "ad-0"
    for side, event in (("left", "impression"), ("right", "click")):
        entries = body["state"][side]
        assert [ts for ts, _ in entries] == sorted(ts for ts, _ in entries)
        assert all(rec["id"] == "ad-0" and rec["event"] == event for _, rec in entries)
        assert all(ts == rec["ts"] for ts, rec in entries)
    missing = c.get("/live-joins/clicked/state/no-such-ad")
    assert missing.status_code == 404 and "no-such-ad" in missing.text


def test_the_backfill_refuses_a_join_naming_it(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(50, seed=1)))
    result = run_weir(
        "backfill", str(job_file(tmp_path, src)), "--input", str(src),
        "--into-savepoint", str(tmp_path / "sp"),
    )  # fmt: skip
    assert result.rc == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.error_lines()[-1] == (
        "weir: error: operator 'wjoin' of job 'joins' is a window join; the backfill does not "
        "compute joins: backfill a job file without it, or run the join over the bounded input "
        "with weir run --exit-at-end"
    )
    assert not (tmp_path / "sp").exists()
