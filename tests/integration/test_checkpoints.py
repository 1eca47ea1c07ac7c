"""Exactly-once state through checkpoints (issue 6): kill -9 a worker, or the whole job manager,
at a random point of a bounded run; after recovery every window equals the brute-force model.
Restores at other parallelisms re-cut the key-group ranges and still give the model's windows.

Sinks are at-least-once across a recovery (results emitted after the last checkpoint are emitted
again, with the same values), so outputs are compared per ``(key, start, end)`` by their last
emission, which is how a consumer that upserts reads them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    WeirResult,
    WeirServer,
    alive,
    comm,
    descendants,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    worker_pids,
    write_lines,
)
from tests.support.reference import IMPRESSIONS_ONLY, Spec, canonical, group_emissions, simulate

N_EVENTS = 24_000
SPEC = Spec(bound=200, size=1_000, lateness=1_500)
# the same filter as the model's, slowed down (~0.1 ms a record) so that a bounded run lasts
# a few seconds and the kill lands in the middle of it
SLOW_IMPRESSIONS = (
    (
        "filter",
        "lambda e: __import__('time').sleep(0.00005) is None and e['event'] == 'impression'",
    ),
)
FAST = ("--batch-size", "256", "--restart-delay-ms", "100", "--checkpoint-interval-ms", "150")


def _last_emissions(out: Path) -> dict[tuple[str, int, int], dict[str, Any]]:
    return {k: v[-1] for k, v in group_emissions(read_jsonl(out)).items()}


def _expected(lines: list[str]) -> Any:
    ref = simulate(lines, SPEC)
    assert len(ref.late) >= 20 and sum(len(s) > 2 for s in ref.emissions.values()) >= 10
    return ref


def _job(tmp_path: Path, write_job: Callable[..., Path], seed: int) -> tuple[Path, list[str]]:
    lines = event_lines(make_events(N_EVENTS, seed=seed))
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(
        src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=SLOW_IMPRESSIONS
    )
    return job, lines


def _assert_matches(ref: Any, out: Path, state: Path) -> None:
    got = _last_emissions(out)
    want = {k: v[-1] for k, v in ref.emissions.items()}
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    assert not missing and not extra, f"missing {missing}, extra {extra}"
    wrong = [(k, got[k], want[k]) for k in sorted(want) if got[k] != want[k]][:3]
    assert not wrong, f"{len([k for k in want if got[k] != want[k]])} windows differ: {wrong}"
    late = read_jsonl(state / "t1" / "late.jsonl")
    assert sorted(set(canonical(late))) == sorted(set(canonical(ref.late)))


def _wait_checkpoint(server: WeirServer, at_least: int = 1) -> dict[str, Any]:
    c = server.client()

    def done() -> dict[str, Any] | None:
        assert server.proc.poll() is None, f"weir exited early:\n{server.stderr()}"
        body: dict[str, Any] = c.get(f"/jobs/{server.job}").json()
        assert body["state"] != "finished", "the run ended before the kill: make it longer"
        return body if (body.get("last_checkpoint") or 0) >= at_least else None

    return wait_until(done, 30.0, what="a completed checkpoint")


def crash_at_2_then_finish_at_3(
    weir_server: Callable[..., WeirServer], job: Path, state: Path
) -> None:
    """Run ``job`` at parallelism 2 until its second checkpoint, kill -9 the whole run, then
    restore the latest checkpoint at parallelism 3 and run to the end of input."""
    first = weir_server(job, "--exit-at-end", "--parallelism", "2", *FAST, state_dir=state)
    _wait_checkpoint(first, at_least=2)
    first.crash()  # the job manager and its workers at once
    second = weir_server(
        job, "--exit-at-end", "--parallelism", "3", *FAST, "--restore", "latest",
        state_dir=state,
    )  # fmt: skip
    assert second.proc.wait(120) == 0, second.stderr()
    assert "restored from" in second.stderr()


# once per parallelism, not once per seed (the suite's time budget); kill -9 recovery also
# runs in test_kafka, test_s3_jobs, test_side_outputs and tests/security/test_sinks_*
@pytest.mark.parametrize(("seed", "parallelism"), [(1, 2), (4, 1)], ids=["s1-p2", "s4-p1"])
def test_kill_9_of_a_worker_recovers_exactly_once(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    seed: int,
    parallelism: int,
) -> None:
    job, lines = _job(tmp_path, write_job, seed)
    ref = _expected(lines)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", str(parallelism),
        *FAST, state_dir=state,
    )  # fmt: skip
    rng = random.Random(seed)
    _wait_checkpoint(server)
    time.sleep(rng.uniform(0.0, 0.8))
    workers = worker_pids(server.proc.pid)
    assert len(workers) == parallelism, workers
    victim = rng.choice(workers)
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(90) == 0, server.stderr()
    stderr = server.stderr()
    assert "restarting (attempt 1 of 3)" in stderr, stderr
    assert "restarted from" in stderr and "chk-" in stderr, stderr
    assert not alive(victim)
    _assert_matches(ref, out, state)


def test_kill_9_of_the_zygote_then_of_a_worker_restarts_with_spawned_workers_exactly_once(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    """The workers' zygote gone (``control.zygote``): the workers it forked go on and are
    still followed, and a restart spawns their successors, saying why."""
    job, lines = _job(tmp_path, write_job, 5)
    ref = _expected(lines)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST,
        state_dir=state,
    )  # fmt: skip
    _wait_checkpoint(server)
    (zygote,) = [p for p in descendants(server.proc.pid) if comm(p) == "weir-zygote"]
    workers = worker_pids(server.proc.pid)
    os.kill(zygote, signal.SIGKILL)
    _wait_checkpoint(server, at_least=2)  # its workers go on
    os.kill(workers[1], signal.SIGKILL)
    assert server.proc.wait(90) == 0, server.stderr()
    stderr = server.stderr()
    # (how the worker ended is lost with its parent, the zygote: it counts as code 255)
    assert "restarting (attempt 1 of 3)" in stderr and "exited with code 255" in stderr, stderr
    assert f"the workers' zygote (pid {zygote}) exited with code -9" in stderr, stderr
    _assert_matches(ref, out, state)


@pytest.mark.parametrize("seed", [6])
def test_kill_9_of_the_job_manager_then_restore_latest_is_exactly_once(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    seed: int,
) -> None:
    job, lines = _job(tmp_path, write_job, seed)
    ref = _expected(lines)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    flags = ("--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST)
    first = weir_server(job, *flags, state_dir=state)
    rng = random.Random(seed)
    _wait_checkpoint(first, at_least=2)
    time.sleep(rng.uniform(0.0, 0.8))
    workers = descendants(first.proc.pid)
    os.kill(first.proc.pid, signal.SIGKILL)  # the job manager and the API with it
    first.proc.wait(10)
    wait_until(lambda: not any(alive(w) for w in workers), 15.0, what="orphaned workers to exit")
    second = weir_server(job, *flags, "--restore", "latest", state_dir=state)
    assert second.proc.wait(90) == 0, second.stderr()
    assert "restored from" in second.stderr()
    _assert_matches(ref, out, state)


def _checkpoint_then_stop(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    seed: int,
    out: Path,
    state: Path,
) -> tuple[Path, list[str]]:
    """Run at parallelism 2 until two checkpoints completed, then kill -9 the whole run."""
    job, lines = _job(tmp_path, write_job, seed)
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST,
        state_dir=state,
    )  # fmt: skip
    _wait_checkpoint(server, at_least=2)
    server.crash()  # the job manager and its workers at once
    return job, lines


@pytest.mark.parametrize("new_parallelism", [1, 4])
def test_restore_at_another_parallelism_rescales_exactly(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
    new_parallelism: int,
) -> None:
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    job, lines = _checkpoint_then_stop(tmp_path, write_job, weir_server, 8, out, state)
    ref = _expected(lines)
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", str(new_parallelism),
        *FAST, "--restore", "latest", state_dir=state,
    )  # fmt: skip
    assert server.proc.wait(90) == 0, server.stderr()
    assert "restored from" in server.stderr()
    _assert_matches(ref, out, state)


def test_a_broken_latest_checkpoint_is_skipped_for_the_one_before(
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    """Missing ``_metadata``, a missing file, or a bad checksum: each newer checkpoint is
    skipped with a log line naming why, and the newest good one is restored."""
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    job, lines = _checkpoint_then_stop(tmp_path, write_job, weir_server, 9, out, state)
    ref = _expected(lines)
    base = state / "checkpoints" / "t1"
    ids = sorted(int(d.name[4:]) for d in base.glob("chk-*") if (d / "_metadata").exists())
    assert len(ids) >= 2, ids
    good, bad = ids[-2], ids[-1]
    meta = json.loads((base / f"chk-{bad}" / "_metadata").read_text())
    shared = [f["shared"] for w in meta["workers"] for f in w["files"] if f.get("shared")]
    good_meta = json.loads((base / f"chk-{good}" / "_metadata").read_text())
    good_shared = {f["shared"] for w in good_meta["workers"] for f in w["files"] if "shared" in f}
    only_bad = [s for s in shared if s not in good_shared]
    private = sorted((base / f"chk-{bad}").glob("w*/MANIFEST-*"))
    assert private, "a checkpoint has per-worker MANIFEST files"
    # a newer, incomplete checkpoint (no _metadata), and a bad checksum in the latest
    (base / f"chk-{bad + 1}" / "w0").mkdir(parents=True)
    target = base / "shared" / only_bad[0] if only_bad else private[0]
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST,
        "--restore", "latest", state_dir=state,
    )  # fmt: skip
    assert server.proc.wait(90) == 0, server.stderr()
    stderr = server.stderr()
    assert f"checkpoint chk-{bad} of job t1 is skipped" in stderr, stderr
    assert "CRC-32" in stderr, stderr
    assert f"restored from {base.resolve()}/chk-{good}" in stderr, stderr
    _assert_matches(ref, out, state)


def test_missing_file_and_bad_restore_path_are_clear_errors(
    tmp_path: Path, write_job: Callable[..., Path], run_weir: Callable[..., WeirResult]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(10, seed=1)))
    job = write_job(src, bound=200, size=1_000, lateness=0, steps=IMPRESSIONS_ONLY)
    state = tmp_path / "state"
    r = run_weir("run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(state),
                 "--restore", "latest")  # fmt: skip
    assert r.rc == 2 and "no complete checkpoint" in r.stderr and "--restore" in r.stderr
    r = run_weir("run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(state),
                 "--restore", str(tmp_path))  # fmt: skip
    assert r.rc == 2 and "not a checkpoint directory" in r.stderr, r.stderr
    chk = state / "checkpoints" / "t1" / "chk-3"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_text(
        json.dumps({"workers": [{"index": 0, "files": [{"name": "000009.sst", "size": 5,
                                                        "crc32": 1, "shared": "gone.sst"}]}]})
    )  # fmt: skip
    r = run_weir("run", str(job), "--exit-at-end", "--api-port", "0", "--state-dir", str(state),
                 "--restore", str(chk))  # fmt: skip
    assert r.rc == 2 and "gone.sst is missing" in r.stderr, r.stderr
