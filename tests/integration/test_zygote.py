"""Local workers forked from ``weir run``'s zygote (``engine/runtime/control/zygote.py``,
decision 0015): what ``multiprocessing`` sees of them, the process tree a run makes, what a
worker inherits and what it runs again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support import WEIR, alive, cmdline, comm, descendants, wait_until

Env = Callable[[dict[str, str] | None], dict[str, str]]

# the API on its own, in a process of its own (forking needs a process without other threads;
# pytest's has them under xdist)
API_SCRIPT = """
import json, os, sys, threading, time, multiprocessing as mp
from weir.engine.runtime.control import zygote

def child(conn, what):
    fds = []
    for f in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{f}").split(":")[0])
        except OSError:
            pass  # the listing's own
    conn.send((os.getpid(), sorted(fds)))
    conn.close()
    if what == "sleep":
        time.sleep(60)
    if what == "raise":
        raise RuntimeError("boom")
    os._exit(int(what))

if __name__ == "__main__":
    z = zygote.start()
    out = {"started": z is not None}
    for what in ("0", "3", "raise", "sleep"):
        a, b = mp.Pipe()
        p = zygote.ZygoteProcess(target=child, args=(b, what), daemon=True)
        p.start()
        b.close()
        pid, fds = a.recv()
        row = {"pid_matches": pid == p.pid, "fds": fds}
        if what == "sleep":
            row["alive"] = p.is_alive()
            p.join(0.2)
            row["after_join_timeout"] = p.exitcode
            p.kill()
        p.join(10)
        row["exitcode"] = p.exitcode
        row["alive_after"] = p.is_alive()
        out[what] = row
    zygote.stop()
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
    out["with_a_thread"] = zygote.start() is not None
    print(json.dumps(out))
"""

LIVE_PY_JOB = """
import os
with open({pids!r}, "a") as f:  # module-level code: runs in weir run and in each worker
    f.write(f"{{os.getpid()}}\\n")
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=500, ids=20), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def test_a_forked_process_reports_its_exit_joins_and_is_killed_like_a_spawned_one(
    tmp_path: Path, weir_env: Env
) -> None:
    script = tmp_path / "api.py"
    script.write_text(API_SCRIPT)
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60,
        env=weir_env(None), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["started"] and not out["with_a_thread"]
    assert out["0"]["exitcode"] == 0 and out["3"]["exitcode"] == 3
    assert out["raise"]["exitcode"] == 1 and "RuntimeError: boom" in r.stderr
    sleeper = out["sleep"]
    assert sleeper["alive"] and sleeper["after_join_timeout"] is None
    assert sleeper["exitcode"] == -signal.SIGKILL and not sleeper["alive_after"]
    for what in ("0", "3", "raise", "sleep"):
        assert out[what]["pid_matches"], out[what]
        # of pipes and sockets: stdout and stderr (captured), its end of the pipe to its parent
        # and the parent's sentinel; nothing of the zygote's (its channel, its signal pipe, a
        # worker's status pipe)
        fds = out[what]["fds"]
        assert fds.count("socket") == 1 and fds.count("pipe") == 3, fds


def _fd_targets(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return found


def _start(
    tmp_path: Path, env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    pids = tmp_path / "pids.txt"
    (tmp_path / "live.py").write_text(LIVE_PY_JOB.format(pids=str(pids)))
    return subprocess.Popen(
        [*WEIR, "run", "live.py", "--no-api", "--parallelism", "2",
         "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, env=env, pass_fds=pass_fds, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _catches_sigterm(pid: int) -> bool:
    """Has ``pid`` installed its SIGTERM handler (a graceful stop) yet?"""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    tree = descendants(proc.pid)
    wait_until(lambda: _catches_sigterm(proc.pid), 30.0, what="weir run to take SIGTERM")
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    wait_until(lambda: not any(alive(p) for p in tree), 15.0, what="the run's processes to exit")


def test_a_run_forks_named_workers_that_inherit_nothing_and_run_the_job_file_themselves(
    tmp_path: Path, weir_env: Env
) -> None:
    outside_r, outside_w = os.pipe()  # a descriptor weir run is started with
    try:
        proc = _start(tmp_path, weir_env(None), pass_fds=(outside_r,))
    finally:
        os.close(outside_r)
    try:

        def tree() -> tuple[list[int], list[int]] | None:
            kids = descendants(proc.pid)
            zygotes = [p for p in kids if comm(p) == "weir-zygote"]
            workers = [p for p in kids if comm(p) == "weir-worker"]
            return (zygotes, workers) if len(workers) == 2 else None

        zygotes, workers = wait_until(tree, 30.0, what="two workers forked by the zygote")
        assert len(zygotes) == 1 and all(zygotes[0] in _parents(w) for w in workers)
        pipe = f"pipe:[{os.fstat(outside_w).st_ino}]"
        assert pipe in _fd_targets(proc.pid)
        for pid in (*zygotes, *workers):
            assert pipe not in _fd_targets(pid), f"{comm(pid)} {pid} inherited {pipe}"
        # the job file's module-level code ran in weir run and once in each worker
        ran = wait_until(
            lambda: (lambda p: p if len(p) == 3 else None)(
                (tmp_path / "pids.txt").read_text().split()
            ),
            30.0,
            what="the job file to run in each worker",
        )
        assert sorted(map(int, ran)) == sorted([proc.pid, *workers])
    finally:
        os.close(outside_w)
        _stop(proc)


def _parents(pid: int) -> list[int]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return [int(stat.rsplit(")", 1)[1].split()[1])]


def test_worker_start_spawn_starts_fresh_interpreters(tmp_path: Path, weir_env: Env) -> None:
    proc = _start(tmp_path, weir_env({"WEIR_WORKER_START": "spawn"}))
    try:

        def spawned() -> list[int] | None:
            kids = [p for p in descendants(proc.pid) if b"spawn_main" in cmdline(p)]
            return kids if len(kids) == 2 else None

        workers = wait_until(spawned, 60.0, what="two spawned workers")
        assert all(_parents(w) == [proc.pid] for w in workers)
        assert not any(comm(p) == "weir-zygote" for p in descendants(proc.pid))
    finally:
        _stop(proc)


PROBE_JOB = """
import gc, os
from weir import Job, WatermarkStrategy, agg, sources, windows

def probe(e):
    with open({out!r}, "a") as f:
        f.write(f"{{os.getpid()}} {{gc.isenabled()}} {{os.environ.get('OPENBLAS_NUM_THREADS')}}\\n")
    return e

job = Job("probe")
(
    job.source(sources.jsonl({events!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
    .map(probe)
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def test_workers_forked_during_start_up_collect_garbage_and_keep_one_blas_thread(
    tmp_path: Path, weir_env: Env
) -> None:
    """weir run pauses the cyclic collector through its start-up and forks the zygote then
    (``app.startup``): the workers must have it back on, or a job's cyclic garbage would pile
    up; and they inherit one OpenBLAS thread, unless the user's environment says otherwise."""
    events, out = tmp_path / "events.jsonl", tmp_path / "probe.txt"
    events.write_text("".join(json.dumps({"id": f"k{i}", "ts": i}) + "\n" for i in range(50)))
    (tmp_path / "probe.py").write_text(PROBE_JOB.format(out=str(out), events=str(events)))
    for blas, expected in ((None, "1"), ("3", "3")):
        out.unlink(missing_ok=True)
        extra = None if blas is None else {"OPENBLAS_NUM_THREADS": blas}
        r = subprocess.run(
            [*WEIR, "run", "probe.py", "--no-api", "--exit-at-end", "--parallelism", "2",
             "--state-dir", str(tmp_path / "state")],
            cwd=tmp_path, env=weir_env(extra), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in out.read_text().splitlines()]
        assert len(rows) == 50
        assert {(on, threads) for _, on, threads in rows} == {("True", expected)}, rows[:3]
