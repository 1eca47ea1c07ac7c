"""Ctrl-C, the same for every command (issue 39 item 10), with real processes: SIGINT to the
whole process group, as a terminal sends it. Each command says at once what it is stopping
(``weir: interrupted (Ctrl-C), stopping …``), stops, and exits 130 with no traceback; the
backfill abandons Spark's start-up within seconds and leaves no JVM behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import WEIR, alive, children, comm, descendants, job_text, wait_until

LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=2000, ids=20), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""
LINE = "weir: interrupted (Ctrl-C), stopping "


class Command:
    """A ``weir`` command in a process group of its own, its stderr in a file."""

    def __init__(self, tmp_path: Path, *argv: str) -> None:
        self.err = tmp_path / f"stderr-{argv[0]}-{time.monotonic_ns()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [*WEIR, *argv], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True,
            )  # fmt: skip

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def ctrl_c(self) -> float:
        """SIGINT to the whole group (workers and API members too); when it was sent."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return time.monotonic()

    def finish(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"not stopped in {timeout} s:\n{self.stderr()}") from None


@pytest.fixture
def weir(tmp_path: Path) -> Iterator[Callable[..., Command]]:
    """``weir(*argv)`` starts a command; every one started is killed (its whole group) at the
    end, whatever the test's outcome."""
    started: list[Command] = []

    def start(*argv: str) -> Command:
        started.append(Command(tmp_path, *argv))
        return started[-1]

    yield start
    for cmd in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cmd.proc.pid, signal.SIGKILL)
        cmd.proc.wait()


def _stopped(cmd: Command, what: str, timeout: float = 30.0) -> None:
    """Exit 130, the line (said within a second of the Ctrl-C), nothing after it but logs."""
    sent = cmd.ctrl_c()
    wait_until(lambda: LINE in cmd.stderr(), 5.0, what="the Ctrl-C line")
    acknowledged = time.monotonic() - sent
    assert cmd.finish(timeout) == 130, cmd.stderr()
    text = cmd.stderr()
    lines = [line for line in text.splitlines() if line.startswith("weir: ")]
    assert lines[-1] == LINE + what, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert acknowledged < 5.0


def test_weir_run_stops_its_job_and_says_so(tmp_path: Path, weir: Callable[..., Command]) -> None:
    (tmp_path / "live.py").write_text(LIVE_JOB)
    cmd = weir("run", "live.py", "--api-port", "0", "--parallelism", "2")
    wait_until(lambda: "serving on" in cmd.stderr(), 60.0, what="serving")
    workers = descendants(cmd.proc.pid)
    assert workers
    _stopped(cmd, "job live")
    wait_until(lambda: not any(alive(pid) for pid in workers), 10.0, what="workers gone")


def test_weir_run_without_an_api_and_weir_api_say_the_same(
    tmp_path: Path, weir: Callable[..., Command]
) -> None:
    (tmp_path / "live.py").write_text(LIVE_JOB)
    run = weir("run", "live.py", "--no-api", "--parallelism", "1")
    wait_until(lambda: "running without an API" in run.stderr(), 60.0, what="the job")
    api = weir("api", "live.py", "--api-port", "0", "--workers", "2")
    wait_until(lambda: "serving on" in api.stderr(), 60.0, what="weir api serving")
    _stopped(api, "the API of job live")
    _stopped(run, "job live")


def test_weir_produce_into_a_file_stops_and_says_so(
    tmp_path: Path, weir: Callable[..., Command]
) -> None:
    cmd = weir("produce", "--file", "events.jsonl", "--count", "1000000000")
    out = tmp_path / "events.jsonl"
    wait_until(lambda: out.exists() and out.stat().st_size > 100_000, 60.0, what="events")
    _stopped(cmd, "weir produce")


@pytest.mark.timeout(180)
def test_the_backfill_abandons_sparks_start_up_within_seconds(
    tmp_path: Path, weir: Callable[..., Command]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    (tmp_path / "job.py").write_text(job_text(src, bound=0, size=10, lateness=0))
    cmd = weir("backfill", "job.py", "--input", str(src), "--into-savepoint", "sp")

    def jvm() -> list[int]:
        return [p for p in children(cmd.proc.pid) if comm(p) == "java"]

    jvms = wait_until(jvm, 120.0, what="Spark's JVM starting")
    sent = cmd.ctrl_c()
    assert cmd.finish(30.0) == 130, cmd.stderr()
    assert time.monotonic() - sent < 10.0  # Spark's start-up alone takes longer here
    text = cmd.stderr()
    assert text.rstrip().endswith(LINE + "the backfill of job t1 on Spark"), text
    assert "Traceback" not in text
    wait_until(lambda: not any(alive(pid) for pid in jvms), 10.0, what="no JVM left")
