"""Count windows in a real ``weir run`` (issue 22 item 4): a bounded file (one split, so each
key's records arrive in file order at any parallelism) through ``windows.count(n)``,
``windows.count(n, slide=m)``, and time and session windows under a trigger and an evictor,
compared with the brute-force model in ``tests/support/trigger_reference.py``; a kill -9 of a
worker in the middle, recovered from a checkpoint of the windows' kept records and trigger counts;
and a key's count window queried over HTTP.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    WeirResult,
    WeirServer,
    read_jsonl,
    wait_until,
    worker_pids,
    write_lines,
)
from tests.support.trigger_reference import TSpec, by_key, simulate

KEYS = ("ad-0", "ad-1", "ad-2", "a/b", "ü")
FAST = ("--batch-size", "64", "--restart-delay-ms", "100", "--checkpoint-interval-ms", "150")


def _records(n: int, seed: int) -> list[dict[str, Any]]:
    """Distinct timestamps, a little out of order (one in 50 far behind: late for time
    windows), so each count window's span is its own."""
    rng = random.Random(seed)
    return [
        {
            "id": rng.choice(KEYS),
            "ts": i * 10 + rng.randrange(8) - (400 if rng.randrange(50) == 0 else 0),
            "value": rng.randrange(100),
        }
        for i in range(n)
    ]


def _job(tmp_path: Path, src: Path, window: str, slow: bool = False) -> Path:
    """``window``: what follows ``key_by``, e.g. ``.window(windows.count(5))``."""
    # a slowed-down filter (~0.2 ms a record) makes a run last long enough to kill it midway
    step = "\n    .filter(lambda e: __import__('time').sleep(0.0002) is None)" if slow else ""
    path = tmp_path / "count_job.py"
    path.write_text(
        f"""from weir import Job, WatermarkStrategy, agg, evictors, sources, triggers, windows

job = Job("cw", max_parallelism=128)
(
    job.source(sources.jsonl({str(src)!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=50)){step}
    .key_by("id")
    {window}
    .aggregate("counts", count=agg.count(), total=agg.sum("value"), lo=agg.min("value"),
               hi=agg.max("value"), avg=agg.mean("value"))
)
""",
        encoding="utf-8",
    )
    return path


CONTINUOUS = (
    ".window(windows.tumbling(ms=200), allowed_lateness_ms=100)"
    ".trigger(triggers.continuous_event_time(50)).evictor(evictors.time(120))"
)

SESSION = (
    ".window(windows.session(gap_ms=60), allowed_lateness_ms=100)"
    ".trigger(triggers.continuous_event_time(50)).evictor(evictors.count(4))"
)


CONTINUOUS_TE = ("continuous:50", "time:120")  # its trigger and evictor


@pytest.mark.parametrize(
    ("window", "spec", "parallelism"),
    [
        (".window(windows.count(5))", TSpec("count", 5, bound=50, op="counts"), 1),
        (".window(windows.count(5))", TSpec("count", 5, bound=50, op="counts"), 2),
        (".window(windows.count(4, slide=2))", TSpec("count", 4, 2, bound=50, op="counts"), 2),
        (".window(windows.count(4, slide=2))", TSpec("count", 4, 2, bound=50, op="counts"), 4),
        (CONTINUOUS, TSpec("tumbling", 200, None, 100, 50, *CONTINUOUS_TE, op="counts"), 2),
        (CONTINUOUS, TSpec("tumbling", 200, None, 100, 50, *CONTINUOUS_TE, op="counts"), 4),
        (SESSION, TSpec("session", 60, None, 100, 50, "continuous:50", "count:4", op="counts"), 2),
    ],
    ids=[
        "count5-p1",
        "count5-p2",
        "count4-slide2-p2",
        "count4-slide2-p4",
        "tumbling-continuous-evictor-p2",
        "tumbling-continuous-evictor-p4",
        "session-continuous-evictor-p2",
    ],
)
def test_triggered_windows_in_weir_run_equal_the_model(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    window: str,
    spec: TSpec,
    parallelism: int,
) -> None:
    recs = _records(600, seed=parallelism)
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(r) for r in recs])
    out = tmp_path / "out.jsonl"
    result = run_weir(
        "run", str(_job(tmp_path, src, window)), "--sink", f"file://{out}", "--exit-at-end",
        "--api-port", "0", "--state-dir", str(tmp_path / "state"),
        "--parallelism", str(parallelism),
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    want = simulate(recs, spec).by_key
    assert sum(len(v) for v in want.values()) > 100
    assert by_key(read_jsonl(out)) == want
    late = read_jsonl(tmp_path / "state" / "cw" / "late.jsonl")
    assert sorted(r["ts"] for r in late) == sorted(r["ts"] for r in simulate(recs, spec).late)


def test_kill_9_of_a_worker_restores_count_windows_exactly_once_and_they_answer_queries(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """The sink is at-least-once across a recovery (what was emitted after the checkpoint is
    emitted again, identically), so the output is compared as a set; the state, read over
    HTTP, is exactly the model's: each key's last purged window and what it holds now."""
    recs = _records(6_000, seed=7)
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(r) for r in recs])
    out = tmp_path / "out.jsonl"
    server = weir_server(
        _job(tmp_path, src, ".window(windows.count(7))", slow=True), "--sink", f"file://{out}",
        "--parallelism", "2", *FAST, state_dir=tmp_path / "state",
    )  # fmt: skip
    c = server.client()

    def checkpointed() -> bool:
        body = c.get(f"/jobs/{server.job}").json()
        assert body["state"] != "finished", "the run ended before the kill: make it longer"
        return bool((body.get("last_checkpoint") or 0) >= 1)

    wait_until(checkpointed, 30.0, what="a completed checkpoint")
    os.kill(random.Random(7).choice(worker_pids(server.proc.pid)), signal.SIGKILL)
    server.wait_finished(90.0)
    assert "restarted from" in server.stderr(), server.stderr()

    want = simulate(recs, TSpec("count", 7, op="counts")).by_key
    got = by_key(read_jsonl(out))
    for key in KEYS:  # every window once, in order, after dropping the replayed duplicates
        assert list(dict.fromkeys(json.dumps(r) for r in got[key])) == [
            json.dumps(r) for r in want[key]
        ]
    key = "a/b"
    answer = c.get(f"/{server.job}/counts/state/{key}").json()
    last = want[key][-1]
    held = [r for r in recs if r["id"] == key][len(want[key]) * 7 :]
    expected = [{k: v for k, v in last.items() if k not in ("op", "key")}]
    if held:
        values = [r["value"] for r in held]
        times = [r["ts"] for r in held]
        expected.append(
            {"start": min(times), "end": max(times) + 1, "count": len(values),
             "total": sum(values), "lo": min(values), "hi": max(values),
             "avg": sum(values) / len(values), "final": False}
        )  # fmt: skip
    assert answer["key"] == key and answer["windows"] == expected
    # routes over windows shared by keys have none to offer here, and say so
    listing = c.get(f"/{server.job}/counts/windows/0")
    assert listing.status_code == 400
    assert "triggered count windows" in listing.json()["error"]["message"]
    top = c.get(f"/{server.job}/counts/top", params={"by": "count"})
    assert top.status_code == 400
    assert "without a trigger or evictor" in top.json()["error"]["message"]


def test_weir_backfill_refuses_count_windows_naming_them(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    """Count windows follow arrival order, which a batch over files does not have: the backfill
    says so and exits 2 before Spark starts, writing nothing."""
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(r) for r in _records(20, seed=1)])
    result = run_weir(
        "backfill", str(_job(tmp_path, src, ".window(windows.count(5))")), "--input", str(src),
        "--work-dir", str(tmp_path / "work"), "--into-savepoint", str(tmp_path / "sp"),
    )  # fmt: skip
    assert result.rc == 2, result.stderr
    assert "operator 'counts' has count windows, which a backfill does not compute" in (
        result.stderr
    )
    assert not (tmp_path / "sp").exists()
