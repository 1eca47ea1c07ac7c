"""Malformed input of every kind, mixed into good input: each bad record lands in the
dead-letter output with its stage, counters agree, and the good records' windows still equal the
brute-force model (in which dead-lettered records never advance the watermark unless they passed
the timestamp stage)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.reference import Spec, canonical, group_emissions, simulate

# map -> flat_map -> filter, so a user function of each kind can raise
STEPS = (
    ("map", "lambda e: 1 // 0 if 'boom' in e else e"),
    ("flat_map", "lambda e: [e] * e.get('copies', 1)"),
    ("filter", "lambda e: e['event'] == 'impression'"),
)
SPEC = Spec(bound=200, size=1_000, lateness=1_500, steps=STEPS)


def _bad(ts: int) -> list[tuple[str | None, str | bytes]]:
    """(expected stage, line); stage None: no dead letter (skipped silently, or, for a NULL key,
    counted in the NULL key's windows)."""
    good = {"id": "ad-1", "event": "impression", "ts": ts, "value": 5}

    def rec(**changes: object) -> str:
        out = {k: v for k, v in {**good, **changes}.items() if v is not ...}
        return json.dumps(out, ensure_ascii=False)

    return [
        ("decode", '{"id": "ad-1", "event": "impression", "ts": 5'),
        ("decode", "this is not json"),
        ("decode", b'\xff\xfe{"id": "ad-1"}'),  # not UTF-8
        ("decode", "[1, 2, 3]"),
        ("decode", "42"),
        ("decode", '"a string"'),
        ("decode", "null"),
        ("timestamp", rec(ts=...)),
        ("timestamp", rec(ts="1700000000000")),
        ("timestamp", rec(ts=12.5)),
        ("timestamp", rec(ts=None)),
        ("timestamp", rec(ts=True)),
        ("key_by", rec(id=...)),
        (None, rec(id=None)),  # the NULL key: its own group (stored as \\N)
        ("aggregate:imps", rec(value=...)),
        ("aggregate:imps", rec(value="abc")),
        ("aggregate:imps", rec(value=None)),
        ("aggregate:imps", rec(value=True)),
        ("filter", rec(event=...)),
        ("map", rec(boom=1)),
        ("flat_map", rec(copies="x")),
        (None, ""),
        (None, "   "),
    ]


def _mixed_input(seed: int) -> tuple[list[str | bytes], Counter[str]]:
    rng = random.Random(seed)
    events = make_events(2_000, seed=seed)
    for e in rng.sample(events, 40):
        e["ts"] = float(e["ts"])  # integral floats are valid timestamps
    for e in rng.sample(events, 30):
        e["copies"] = 2  # flat_map doubles these
    lines: list[str | bytes] = list(event_lines(events))
    expected: Counter[str] = Counter()
    for _ in range(3):
        for stage, line in _bad(ts=rng.choice(events)["ts"]):
            lines.insert(rng.randrange(len(lines) + 1), line)
            if stage:
                expected[stage] += 1
    return lines, expected


def test_dead_letters_counters_and_windows(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    lines, expected = _mixed_input(seed=5)
    ref = simulate(lines, SPEC)
    # the late decision comes first: a record without a number to aggregate that is late goes
    # to the late output, not to the dead letters
    late_bad = sum(type(x["record"].get("value")) not in (int, float) for x in ref.late)
    assert late_bad
    expected["aggregate:imps"] -= late_bad
    assert ref.dead_by_stage() == expected  # the model agrees with the intent of the input

    src = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=STEPS)
    server = weir_server(job, "--sink", f"file://{out}", "--parallelism", "2")
    detail = server.wait_finished()

    dead = read_jsonl(server.job_dir / "dead-letter.jsonl")
    assert all(set(d) == {"stage", "reason", "input"} and d["reason"] for d in dead)
    assert Counter(d["stage"] for d in dead) == expected
    assert canonical({"stage": d["stage"], "input": d["input"]} for d in dead) == canonical(
        ref.dead
    )

    assert detail["dead_letters"] == sum(expected.values())
    by_stage: Counter[str] = Counter()
    for worker in detail["workers"]:
        by_stage.update(worker["dead_letters_by_stage"])
    assert by_stage == expected
    assert detail["operators"][0]["late_records"] == len(ref.late)

    # the good records: every window's final emission, and what the API serves
    got = group_emissions(read_jsonl(out))
    assert {k: v[-1] for k, v in got.items()} == {k: v[-1] for k, v in ref.emissions.items()}
    client = server.client()
    assert "\\N" in ref.state_by_key()  # the NULL key's windows, at its path form
    for key, windows in ref.state_by_key().items():
        assert client.get(f"/t1/imps/state/{quote(key, safe='')}").json()["windows"] == windows
    assert canonical(read_jsonl(server.job_dir / "late.jsonl")) == canonical(ref.late)


def test_side_outputs_go_where_the_flags_say(
    tmp_path: Path, write_job: Callable[..., Path], run_weir: Callable[..., WeirResult]
) -> None:
    spec = Spec(bound=0, size=100, lateness=0)
    lines = [
        json.dumps({"id": "a", "event": "impression", "ts": 500, "value": 1}),
        "not json",
        json.dumps({"id": "a", "event": "impression", "ts": 50, "value": 2}),  # late
    ]
    src = write_lines(tmp_path / "in.jsonl", lines)
    dead_path, late_path = tmp_path / "side" / "dead.jsonl", tmp_path / "side" / "late.jsonl"
    job = write_job(src, bound=spec.bound, size=spec.size, lateness=spec.lateness)
    result = run_weir(
        "run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(tmp_path / "st"),
        "--sink", f"file://{tmp_path / 'out.jsonl'}",
        "--dead-letter", f"file://{dead_path}", "--late-sink", f"file://{late_path}",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    dead = read_jsonl(dead_path)
    assert [(d["stage"], d["input"]) for d in dead] == [("decode", "not json")]
    assert "JSON" in dead[0]["reason"] or "json" in dead[0]["reason"]
    late = read_jsonl(late_path)
    assert late == [
        {
            "op": "imps",
            "key": "a",
            "ts": 50,
            "watermark": 499,
            "record": {"id": "a", "event": "impression", "ts": 50, "value": 2},
        }
    ]
    assert not (tmp_path / "st" / "t1" / "dead-letter.jsonl").exists()
    assert not (tmp_path / "st" / "t1" / "late.jsonl").exists()


def test_timestamp_beyond_the_int64_window_range_does_not_kill_the_job(
    tmp_path: Path, write_job: Callable[..., Path], run_weir: Callable[..., WeirResult]
) -> None:
    """A valid JSON integer whose window end does not fit the 8-byte namespace must go to the
    dead letters like any other bad input, not crash the worker."""
    spec = Spec(bound=0, size=1_000, lateness=0)
    good = [{"id": "a", "event": "impression", "ts": t, "value": 1} for t in (10, 20, 1_500)]
    huge = {"id": "a", "event": "impression", "ts": 2**63 - 1, "value": 1}
    lines = [*event_lines(good), json.dumps(huge)]
    src = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    job = write_job(src, bound=spec.bound, size=spec.size, lateness=spec.lateness)
    result = run_weir(
        "run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(tmp_path / "st"),
        "--sink", f"file://{out}",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    dead = read_jsonl(tmp_path / "st" / "t1" / "dead-letter.jsonl")
    assert [d["input"] for d in dead] == [huge]
    ref = simulate(event_lines(good), spec)
    assert group_emissions(read_jsonl(out)) == ref.emissions


def test_a_far_future_timestamp_goes_to_the_dead_letters_and_closes_no_window(
    tmp_path: Path, write_job: Callable[..., Path], run_weir: Callable[..., WeirResult]
) -> None:
    """One event a year ahead of the wall clock would drag the watermark past every open window
    (then every later record would be late). Past ``--max-future-ms`` (default: a day) it is a
    dead letter instead, and the windows are the model's without it."""
    import time

    spec = Spec(bound=500, size=1_000, lateness=0)
    now = int(time.time() * 1000)
    good = [{"id": "a", "event": "impression", "ts": now - 5_000 + i * 100, "value": 1}
            for i in range(40)]  # fmt: skip
    future = {"id": "a", "event": "impression", "ts": now + 365 * 86_400_000, "value": 1}
    lines = [*event_lines(good[:20]), json.dumps(future), *event_lines(good[20:])]
    src = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    job = write_job(src, bound=spec.bound, size=spec.size, lateness=spec.lateness)
    result = run_weir(
        "run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(tmp_path / "st"),
        "--sink", f"file://{out}",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    dead = read_jsonl(tmp_path / "st" / "t1" / "dead-letter.jsonl")
    assert [d["input"] for d in dead] == [future]
    assert "ahead of the wall clock" in dead[0]["reason"] and "`max_future_ms`" in dead[0]["reason"]
    assert read_jsonl(tmp_path / "st" / "t1" / "late.jsonl") == []
    assert group_emissions(read_jsonl(out)) == simulate(event_lines(good), spec).emissions
    # with the limit off, the same input closes the windows early: later records are late
    result = run_weir(
        "run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(tmp_path / "st2"),
        "--sink", f"file://{tmp_path / 'out2.jsonl'}", "--max-future-ms", "0",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert len(read_jsonl(tmp_path / "st2" / "t1" / "late.jsonl")) == 20


def _all_dead_job(tmp_path: Path, write_job: Callable[..., Path], n: int) -> Path:
    """A job whose map raises on every one of ``n`` good-looking records."""
    events = [
        {"id": f"k{i % 5}", "event": "impression", "ts": i * 10, "value": 1} for i in range(n)
    ]
    src = write_lines(tmp_path / "in.jsonl", event_lines(events))
    return write_job(src, bound=0, size=100, lateness=0, steps=(("map", "lambda e: 1 // 0"),))


def test_a_job_whose_every_record_is_dead_says_so_loudly(
    tmp_path: Path, write_job: Callable[..., Path], run_weir: Callable[..., WeirResult]
) -> None:
    """Issue 39 item 1: before, this exited 0 with nothing above INFO."""
    job = _all_dead_job(tmp_path, write_job, 500)
    flags = ("--exit-at-end", "--no-api", "--state-dir", str(tmp_path / "st"))
    result = run_weir("run", str(job), *flags)
    assert result.rc == 0, result.stderr
    warnings = [line for line in result.error_lines() if " WARNING " in line]
    first = [w for w in warnings if "dead letter: stage=map kind=ZeroDivisionError" in w]
    assert len(first) == 1, result.stderr  # once, however many records
    assert "first at split=" in first[0] and "line=1:" in first[0], first[0]
    assert any("every one of its records=500 went to the dead letters" in w for w in warnings)
    summary = [w for w in warnings if "input ended: dead_letters=500 of records_in=500" in w]
    assert len(summary) == 1 and "kind=ZeroDivisionError" in summary[0], result.stderr
    assert len(warnings) <= 4, result.stderr  # a bounded number of lines, not one a record

    # past --max-dead-letter-ratio the job fails, saying why
    result = run_weir("run", str(job), *flags, "--max-dead-letter-ratio", "0.5")
    assert result.rc == 1, result.stderr
    failed = [line for line in result.error_lines() if line.startswith("weir: error:")]
    assert len(failed) == 1, result.stderr
    assert "500 of 500 records read (100.0%)" in failed[0]
    assert "--max-dead-letter-ratio=0.5" in failed[0] and "ZeroDivisionError" in failed[0]


def test_health_is_degraded_above_the_limit_before_it_is_judged(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    job = _all_dead_job(tmp_path, write_job, 10)
    server = weir_server(
        job, "--source", "generator://ads?rate=500&ids=5",
        "--max-dead-letter-ratio", "0.1", "--dead-letter-min-records", str(10**9),
    )  # fmt: skip
    client = server.client()

    def degraded() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get("/health").json()
        return body if body.get("status") == "degraded" else None

    body = wait_until(degraded, 30.0, what="/health to say degraded")
    assert "max_dead_letter_ratio" in str(body) or "max-dead-letter-ratio" in str(body), body
    assert "ZeroDivisionError" in str(body), body
