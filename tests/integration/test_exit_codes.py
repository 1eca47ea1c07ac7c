"""``weir``'s exit codes, from real runs: what the user typed wrong exits 2, a job that fails
while it runs exits 1 (a worker that dies past the restart strategy, a checkpoint that cannot
be restored once the workers try, a broker gone for good), each with one ``weir: error:`` line
at the end and no traceback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WEIR, WeirResult, job_text, wait_until

Run = Callable[..., WeirResult]
ERROR = "weir: error: "


def _last_error(result: WeirResult, rc: int) -> str:
    assert result.rc == rc, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.error_lines() if line.startswith(ERROR)]
    assert len(errors) == 1 and result.error_lines()[-1] == errors[0], result.stderr
    return errors[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", "{job}", "--parallelism", "0"), "--parallelism='0' is too small"),
        (("run", "{tmp}/missing.py"), "missing.py does not exist"),
        (("run", "nosuchpkg.jobs:ads"), "no module named 'nosuchpkg'"),
        (("run", "{job}", "--restore", "latest", "--state-dir", "st"), "no complete checkpoint"),
        (("run", "{job}", "--parallelism", "300", "--api-port", "0"), "max_parallelism=128"),
        (("api", "{tmp}/in.jsonl"), "is not a .py file"),
    ],
    ids=[
        "bad-flag-value",
        "missing-job-file",
        "missing-module",
        "nothing-to-restore",
        "parallelism-above-key-groups",
        "not-a-job-file",
    ],  # fmt: skip
)
def test_usage_errors_exit_2(
    run_weir: Run, job_file: Path, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    argv = [a.format(job=job_file, tmp=tmp_path) for a in args]
    assert needle in _last_error(run_weir(*argv), 2)


def test_a_worker_that_dies_fails_the_job_with_1(run_weir: Run, tmp_path: Path) -> None:
    """No restart is configured (no checkpoints), so the first failure ends the job. (A
    missing input file no longer gets this far: it is a usage error before anything starts.)"""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    dies = (("map", "lambda e: __import__('os')._exit(3)"),)
    job = tmp_path / "dies.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0, steps=dies))
    result = run_weir(
        "run", str(job), "--exit-at-end", "--no-api", "--state-dir", "st", "--parallelism", "2",
    )  # fmt: skip
    line = _last_error(result, 1)
    assert line.startswith(f"{ERROR}job t1 failed: worker ")


def test_a_broker_gone_for_good_fails_the_job_with_1(run_weir: Run, job_file: Path) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run_weir(
        "run", str(job_file), "--source", f"kafka://127.0.0.1:{port}/events", "--no-api",
        "--state-dir", "st", "--parallelism", "1",
        env={"WEIR_KAFKA_CONNECT_TIMEOUT_S": "2"},
    )  # fmt: skip
    line = _last_error(result, 1)
    assert f"cannot reach the Kafka broker at 127.0.0.1:{port}" in line


def _checkpointed(run_weir: Run, job_file: Path, state: Path) -> Path:
    """Run the job on a synthetic stream with checkpoints; the newest checkpoint."""
    result = run_weir(
        "run", str(job_file), "--exit-at-end", "--no-api", "--state-dir", str(state),
        "--parallelism", "1", "--checkpoint-interval-ms", "100", "--log-level", "WARNING",
        "--source", "generator://ads?rate=4000&count=4000&clock=synthetic&seed=3",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    chks = sorted((state / "checkpoints" / "t1").glob("chk-*"), key=lambda p: int(p.name[4:]))
    assert chks, result.stderr
    return chks[-1]


def _corrupt_manifest_keeping_its_checksum(chk: Path) -> None:
    """Garbage in RocksDB's MANIFEST, with the size and CRC-32 the metadata records: every
    check before the start passes, and the worker cannot open the restored state."""
    meta = json.loads((chk / "_metadata").read_text())
    [entry] = [f for f in meta["workers"][0]["files"] if f["name"].startswith("MANIFEST")]
    junk = (b"not a manifest " * (entry["size"] // 15 + 1))[: entry["size"]]
    (chk / "w0" / entry["name"]).write_bytes(junk)
    entry["crc32"] = zlib.crc32(junk)
    (chk / "_metadata").write_text(json.dumps(meta))


def test_a_restore_that_fails_in_the_workers_exits_1_after_the_restarts(
    run_weir: Run, job_file: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    _corrupt_manifest_keeping_its_checksum(_checkpointed(run_weir, job_file, state))
    result = run_weir(
        "run", str(job_file), "--exit-at-end", "--no-api", "--state-dir", str(state),
        "--restore", "latest", "--restart-attempts", "1", "--restart-delay-ms", "0",
        "--parallelism", "1",
    )  # fmt: skip
    line = _last_error(result, 1)
    assert "cannot open RocksDB state" in line and "MANIFEST-" in line
    assert "restarting (attempt 1 of 1)" in result.stderr


def test_ctrl_c_while_spark_starts_ends_with_one_line_and_130(
    tmp_path: Path, job_file: Path
) -> None:
    """Ctrl-C while Spark's JVM starts (a backfill's session): no Java or Python stack trace
    (PySpark's JVM dying under its removed connection file, Py4J logging the interrupted call),
    one line of weir's, exit 130."""
    events = tmp_path / "in.jsonl"
    events.write_text("".join(f'{{"id": "a", "ts": {i}, "value": 1}}\n' for i in range(100)))
    proc = subprocess.Popen(
        [*WEIR, "backfill", str(job_file), "--input", str(events),
         "--into-savepoint", str(tmp_path / "sp"), "--work-dir", str(tmp_path / "w")],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        # the JVM is up and the session is being built through Py4J calls
        wait_until(lambda: any("log4j" in line for line in lines), 60, what="Spark's JVM")
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        rc = proc.wait(60)
    finally:
        # whatever is left of the group (a JVM that outlived weir before the fix) goes too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join(10)
    stderr = "".join(lines)
    assert rc == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert lines[-1].strip().startswith("weir: interrupted (Ctrl-C), stopping the backfill"), stderr
