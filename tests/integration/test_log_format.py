"""``--log-format json``: every line a real ``weir run`` writes to stderr, from the job manager,
the API server and the spawned workers, is one JSON object whose ``key=value`` pairs are fields."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support import WEIR, WeirResult, job_text, wait_until

Run = Callable[..., WeirResult]


def _job(tmp_path: Path, n: int = 50, steps: tuple[tuple[str, str], ...] = ()) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": f"k{i % 5}", "event": "impression", "ts": i, "value": i}) + "\n"
            for i in range(n)
        )
    )
    path = tmp_path / "job.py"
    path.write_text(job_text(src, bound=0, size=10, lateness=0, steps=steps))
    return path


def _records(stderr: str) -> list[dict[str, Any]]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "nothing was logged"
    records = [json.loads(line) for line in lines]  # every line, or this raises
    for r in records:
        assert {"time", "level", "logger", "process", "message"} <= set(r), r
        assert datetime.fromisoformat(r["time"]).tzinfo is not None
    return records


def test_json_lines_from_the_job_manager_and_the_workers(tmp_path: Path, run_weir: Run) -> None:
    result = run_weir(
        "run", str(_job(tmp_path)), "--exit-at-end", "--no-api", "--parallelism", "2",
        "--state-dir", "st", "--log-format", "json",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    records = _records(result.stderr)
    [started] = [r for r in records if r["message"] == "job=t1 started workers=2"]
    assert started["logger"] == "weir.engine.runtime.control.jobmanager"
    assert started["process"] == "MainProcess" and started["level"] == "INFO"
    assert started["job"] == "t1" and started["workers"] == 2  # fields keep their types
    finished = [r for r in records if r["logger"] == "weir.engine.runtime.task.worker"]
    assert sorted(r["worker"] for r in finished) == [0, 1]
    assert {r["process"] for r in finished} == {"weir-t1-worker-0", "weir-t1-worker-1"}
    assert sum(r["records_in"] for r in finished) == 50
    assert all(r["message"].startswith(f"worker={r['worker']} finished") for r in finished)
    [headless] = [r for r in records if r["logger"] == "weir"]
    assert headless["message"].startswith("job t1 running without an API")


def test_the_serving_line_and_the_final_error_are_json_too(tmp_path: Path, run_weir: Run) -> None:
    """Set by the variable; the API's URL is a field; a failed job's last line is an ERROR (a
    worker that dies: a missing input file is found before anything starts now). The worker
    dies once the API serves (the status file names it; 30 s at most): a forked worker reaches
    its first record before the API is up."""
    status = "st/t1/jobmanager.json"
    read = f"(open({status!r}).read() if __import__('os').path.exists({status!r}) else '')"
    waited = f"any('http://' in {read} or __import__('time').sleep(0.02) for _ in range(1500))"
    dies = (("map", f"lambda e: {waited} and __import__('os')._exit(3)"),)
    result = run_weir(
        "run", str(_job(tmp_path, steps=dies)), "--exit-at-end", "--api-port", "0",
        "--state-dir", "st", "--parallelism", "1", env={"WEIR_LOG_FORMAT": "json"},
    )  # fmt: skip
    assert result.rc == 1, result.stderr
    records = _records(result.stderr)
    [serving] = [r for r in records if r["message"].startswith("job t1 serving on ")]
    assert serving["url"].startswith("http://127.0.0.1:") and serving["job"] == "t1"
    last = records[-1]
    assert last["level"] == "ERROR" and last["logger"] == "weir"
    assert last["message"].startswith("job t1 failed: worker 0 failed: process ")


def test_text_stays_the_default(tmp_path: Path, run_weir: Run) -> None:
    result = run_weir(
        "run", str(_job(tmp_path)), "--exit-at-end", "--no-api", "--parallelism", "1",
        "--state-dir", "st",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert " INFO weir.engine.runtime.task.worker: worker=0 finished records_in=50" in result.stderr
    assert "weir: job t1 running without an API" in result.stderr
    assert not any(line.startswith("{") for line in result.stderr.splitlines())


def test_weir_api_logs_json(tmp_path: Path) -> None:
    """The API process, before its job runs: the warning, the serving line and then uvicorn's
    own records go through the same handler."""
    stderr = tmp_path / "api.stderr"
    argv = [*WEIR, "api", str(_job(tmp_path)), "--api-port", "0", "--state-dir", "st"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["WEIR_LOG_FORMAT"] = "json"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=err, start_new_session=True)
    try:

        def serving() -> dict[str, Any] | None:
            assert proc.poll() is None, stderr.read_text()
            text = stderr.read_text()
            lines = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
            return next((r for r in lines if "url" in r), None)

        url = wait_until(serving, 30.0, what="the serving line")["url"]
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    records = _records(stderr.read_text())
    [warning] = [r for r in records if r["level"] == "WARNING"]
    assert warning["logger"] == "weir.app.api_process" and warning["job"] == "t1"
    assert "no status from the job manager yet" in warning["message"]
