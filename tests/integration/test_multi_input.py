"""Several inputs through a real ``weir run``: two file sources, a union feeding a tumbling
window and a connected co-process function (``tests.support.multiinput``), at parallelism 1, 2
and 4, equal to the brute-force reference; a kill -9 of a worker of the connected job recovers
exactly once; the co-process function's keyed state restores at another parallelism; and a
one-source job's checkpoint keeps its positions' format and restores."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_checkpoints import (
    FAST,
    _assert_matches,
    _checkpoint_then_stop,
    _expected,
    _wait_checkpoint,
)
from tests.support import (
    WeirResult,
    WeirServer,
    alive,
    read_jsonl,
    wait_until,
    worker_pids,
    write_events,
)
from tests.support.multiinput import (
    both_rows,
    ctr_rows,
    expected_both,
    expected_ctr,
    job_text,
    make_events,
)


def _inputs(tmp_path: Path, n: int, seed: int) -> tuple[Any, Any, Path, Path]:
    views = make_events(n, seed, step=4)
    clicks = make_events(n // 3, seed + 1, step=12)
    return (
        views,
        clicks,
        write_events(tmp_path / "views.jsonl", views),
        write_events(tmp_path / "clicks.jsonl", clicks),
    )


def _job(tmp_path: Path, views: Path, clicks: Path, sleep: float = 0.0) -> tuple[Path, Path]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    job = tmp_path / "job.py"
    job.write_text(job_text(views, clicks, out, sleep), encoding="utf-8")
    return job, out


def _rows(out: Path) -> tuple[Any, Any]:
    return both_rows(read_jsonl(out / "both.jsonl")), ctr_rows(read_jsonl(out / "ctr.jsonl"))


def _assert_reference(out: Path, views: Any, clicks: Any, wait_s: float = 0.0) -> None:
    """Every window and every bucket once, with the reference's values. ``wait_s``: how long a
    running job's file sinks may take to write their last rows (they do when the final
    checkpoint completes, a moment after the job reports finished)."""
    want = sorted(expected_both(views, clicks)), sorted(expected_ctr(views, clicks))
    if wait_s:
        try:
            wait_until(lambda: _rows(out) == want, wait_s, what="the sinks' last rows")
        except AssertionError:
            pass  # the asserts below say what differs
    both, ctr = _rows(out)
    assert both == want[0]
    assert ctr == want[1]


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_two_sources_union_and_connect_equal_the_reference(
    tmp_path: Path, run_weir: Callable[..., WeirResult], parallelism: int
) -> None:
    views, clicks, v_path, c_path = _inputs(tmp_path, 3_000, seed=parallelism)
    job, out = _job(tmp_path, v_path, c_path)
    r = run_weir(
        "run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir",
        str(tmp_path / "state"), "--parallelism", str(parallelism),
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    _assert_reference(out, views, clicks)


def test_kill_9_of_a_worker_of_a_connected_job_is_exactly_once(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    views, clicks, v_path, c_path = _inputs(tmp_path, 12_000, seed=21)
    job, out = _job(tmp_path, v_path, c_path, sleep=0.0004)
    server = weir_server(job, "--exit-at-end", "--parallelism", "2", *FAST)
    _wait_checkpoint(server)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(120) == 0, server.stderr()
    assert "restarting (attempt 1 of 3)" in server.stderr() and not alive(victim)
    _assert_reference(out, views, clicks)


def _state(base_url: str, job: str, key: str) -> dict[str, Any] | None:
    """A process function's states for ``key`` (None: not found yet)."""
    with httpx.Client(base_url=base_url, timeout=10.0, trust_env=False) as c:
        r = c.get(f"/{job}/ctr/state/{key}")
        assert r.status_code in (200, 404), r.text
        return r.json()["state"] if r.status_code == 200 else None  # type: ignore[no-any-return]


def test_connected_state_restores_at_another_parallelism(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Two checkpoints at parallelism 2, the whole run killed, then a restore at 4: every bucket
    once, and each key's running totals (the co-process function's value state) are queryable
    with the reference's counts."""
    views, clicks, v_path, c_path = _inputs(tmp_path, 12_000, seed=5)
    job, out = _job(tmp_path, v_path, c_path, sleep=0.0004)
    state = tmp_path / "state"
    first = weir_server(job, "--exit-at-end", "--parallelism", "2", *FAST, state_dir=state)
    _wait_checkpoint(first, at_least=2)
    first.crash()  # the job manager and its workers at once
    meta = _latest_metadata(state / "checkpoints" / "two")
    assert {s.split("/", 1)[0] for w in meta["workers"] for s in w["sources"]} == {
        "views",
        "clicks",
    }
    second = weir_server(job, "--parallelism", "4", *FAST, "--restore", "latest", state_dir=state)
    second.wait_finished(90)
    assert "restored from" in second.stderr()
    _assert_reference(out, views, clicks, wait_s=30.0)
    for key in sorted({e["id"] for e in views})[:4]:
        want = {
            "total_views": sum(e["id"] == key for e in views),
            "total_clicks": sum(e["id"] == key for e in clicks),
        }

        def totals(key: str = key, want: dict[str, int] = want) -> dict[str, Any] | None:
            found = _state(second.base_url, "two", key) or {}
            got = {name: found.get(name) for name in want}
            return got if got == want else None  # the API reads RocksDB as it catches up

        wait_until(totals, 15.0, what=f"key {key}'s totals {want}")


def _latest_metadata(base: Path) -> dict[str, Any]:
    ids = sorted(int(d.name[4:]) for d in base.glob("chk-*") if (d / "_metadata").exists())
    assert ids, f"no complete checkpoint under {base}"
    meta: dict[str, Any] = json.loads((base / f"chk-{ids[-1]}" / "_metadata").read_text())
    return meta


def test_a_one_source_checkpoint_keeps_its_positions_format_and_restores(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    """A one-source job's checkpoint positions are keyed by the source's own split names, as
    before several sources existed (no source name in them). It restores at parallelism 1 into
    the job grown by a second source: the bare names are the first source's, which resumes
    where it was (a replay from its start would emit every window twice)."""
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    job, lines = _checkpoint_then_stop(tmp_path, write_job, weir_server, 12, out, state)
    meta = _latest_metadata(state / "checkpoints" / "t1")
    assert sorted(s for w in meta["workers"] for s in w["sources"]) == [str(tmp_path / "in.jsonl")]
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"id": "x", "ts": 1}\n', encoding="utf-8")
    job.write_text(
        job.read_text(encoding="utf-8")
        + f"job.source(sources.jsonl({str(extra)!r}), name='extra').key_by('id')"
        ".process(lambda e, ctx: None, name='noop')\n",
        encoding="utf-8",
    )
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "1", *FAST,
        "--restore", "latest", state_dir=state,
    )  # fmt: skip
    assert server.proc.wait(90) == 0, server.stderr()
    assert "restored from" in server.stderr()
    _assert_matches(_expected(lines), out, state)


def test_source_override_and_backfill_refuse_a_job_of_two_sources(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    _, _, v_path, c_path = _inputs(tmp_path, 10, seed=3)
    job, _ = _job(tmp_path, v_path, c_path)
    r = run_weir(
        "run", str(job), "--source", f"file://{v_path}", "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert r.rc == 2 and "reads 2 sources (views, clicks); --source replaces" in r.stderr
    r = run_weir("backfill", str(job), "--input", str(v_path), "--into-savepoint", "sp")
    assert r.rc == 2 and "the backfill computes jobs of one source" in r.stderr, r.stderr
