"""Every lifecycle command finds its job the same way: under the state directory, where the job
manager publishes its control port and its API's address; ``--api-url`` only overrides. A job
on a port other than 8000 is found without naming the port (issue 39 item 3: ``weir
savepoint`` asked :8000 whatever the job's port), and one unit per idea: ``--timeout-ms``
(``weir stop --timeout-s`` is its deprecated alias)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support import WeirResult, WeirServer, wait_until

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

Run = Callable[..., WeirResult]


def test_savepoint_checkpoints_and_list_find_the_job_in_its_state_directory(
    tmp_path: Path, weir_server: Callable[..., WeirServer], run_weir: Run
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    state = tmp_path / "state"
    server = weir_server(job, "--parallelism", "1", state_dir=state)
    assert not server.base_url.endswith(":8000")  # --api-port 0: any free port
    where = ("--state-dir", str(state))

    taken = run_weir("savepoint", "live", *where, "--json")
    assert taken.rc == 0, taken.stderr
    first = json.loads(taken.stdout)
    assert (Path(first["path"]) / "_metadata").is_file()

    by_url = run_weir("savepoint", "live", "--api-url", server.base_url, "--timeout-ms", "30000")
    assert by_url.rc == 0, by_url.stderr
    assert by_url.stdout.startswith("savepoint ") and "chk-" in by_url.stdout

    from_storage = run_weir("checkpoints", "live", *where, "--json")
    from_api = run_weir("checkpoints", "live", "--api-url", server.base_url, "--json")
    assert from_storage.rc == 0 and from_api.rc == 0, from_storage.stderr + from_api.stderr
    ids = [c["id"] for c in json.loads(from_storage.stdout)]
    assert first["id"] in ids and len(ids) == 2
    assert [c["id"] for c in json.loads(from_api.stdout)] == ids

    listed = json.loads(run_weir("list", *where, "--json").stdout)
    assert [(j["job"], j["api_url"]) for j in listed] == [("live", server.base_url)]
    served = json.loads(run_weir("list", "--api-url", server.base_url, "--json").stdout)
    assert [(j["job"], j["state"]) for j in served] == [("live", "running")]


def test_a_job_not_found_names_the_jobs_there_and_the_flag(
    tmp_path: Path, weir_server: Callable[..., WeirServer], run_weir: Run
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    state = tmp_path / "state"
    weir_server(job, "--parallelism", "1", state_dir=state)
    r = run_weir("savepoint", "taxi", "--state-dir", str(state))
    assert r.rc == 2, r.stderr
    assert r.error_lines() == [
        f"weir: error: no job 'taxi' under {state} (jobs there: live); pass the --state-dir "
        "its weir run uses"
    ]


def test_stop_takes_its_timeout_in_ms_and_the_seconds_flag_still_works_with_a_warning(
    tmp_path: Path, weir_server: Callable[..., WeirServer], run_weir: Run
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    state = tmp_path / "state"
    server = weir_server(job, "--parallelism", "1", state_dir=state)
    r = run_weir("stop", "live", "--savepoint", "--timeout-s", "30", "--state-dir", str(state))
    assert r.rc == 0, r.stderr
    assert r.error_lines()[0] == (
        "weir: --timeout-s is deprecated; use --timeout-ms (--timeout-s 30 is --timeout-ms 30000)"
    )
    assert r.stdout.startswith("job live stopped with savepoint ")
    wait_until(lambda: server.proc.poll() is not None, 30.0, what="weir run to exit")
    again = run_weir("stop", "live", "--timeout-ms", "0", "--state-dir", str(state))
    assert again.rc == 2 and "--timeout-ms='0' is too small; use 1 or more" in again.stderr
