"""Storage URLs at the command line, against a real S3-compatible server (SeaweedFS):

- a URL of a scheme weir does not support, or a mistyped one, is a usage error (exit 2) on one
  line listing the supported schemes, for every command that takes a storage location, and
  never becomes a local directory (``s3:``);
- ``weir run`` with S3 storage it cannot use (unknown bucket, wrong secret key, a closed
  endpoint port) fails at the start, on one line naming the URL and what to check, never
  printing the secret;
- ``weir stop --savepoint --savepoint-dir s3://…`` exports a savepoint to S3 that restores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_lifecycle_commands import (
    GENERATOR,
    STATE,
    _generator_job,
    _records_in,
)
from tests.support import WeirResult, WeirServer, wait_until
from tests.support.broker import free_port
from tests.support.s3_server import SECRET_KEY
from tests.support.servers import S3Place
from weir.state.checkpoints import CheckpointStorage
from weir.state.objectstore import SCHEMES

BAD_URLS = ["gs://b/p", "hdfs://x/y", "s3:/typo"]


def _commands(job: Path, url: str) -> list[tuple[str, ...]]:
    return [
        ("run", str(job), "--checkpoint-dir", url, "--exit-at-end", "--api-port", "0"),
        ("checkpoints", "t1", "--checkpoint-dir", url),
        ("api", str(job), "--checkpoint-dir", url, "--api-port", "0"),
        ("backfill", str(job), "--input", "in.jsonl", "--into-savepoint", url),
        ("stop", "t1", "--savepoint", "--savepoint-dir", url),
    ]


@pytest.mark.parametrize("url", BAD_URLS)
def test_an_unsupported_storage_url_is_a_one_line_usage_error_listing_the_schemes(
    tmp_path: Path, job_file: Path, run_weir: Callable[..., WeirResult], url: str
) -> None:
    for argv in _commands(job_file, url):
        r = run_weir(*argv, "--state-dir", str(tmp_path / "state"))
        flag = argv[argv.index(url) - 1]
        assert r.rc == 2, (argv, r.stderr)
        assert r.error_lines() == [
            f"weir: error: {flag}={url!r} is not a storage location weir supports; use "
            f"{SCHEMES}; see 'weir {argv[0]} --help'"
        ], r.stderr
    r = run_weir("run", str(job_file), "--exit-at-end", env={"WEIR_CHECKPOINT_DIR": url})
    assert r.rc == 2 and f"WEIR_CHECKPOINT_DIR={url!r} is not a storage location" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "job.py"]


@pytest.mark.parametrize(
    ("bucket", "change", "fix"),
    [
        ("no-such-bucket", {}, "the bucket does not exist at http://127.0.0.1:{s3port}: create "
         "it, or fix the bucket name"),
        ("weir", {"AWS_SECRET_ACCESS_KEY": "not-the-secret-0123"}, "access denied: check "
         "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and that they may read and write this bucket "
         "and prefix"),
        ("weir", {"AWS_ENDPOINT_URL": "http://127.0.0.1:{closed}"}, "cannot reach "
         "http://127.0.0.1:{closed}: check AWS_ENDPOINT_URL (scheme, host and port) and that the "
         "server is up"),
    ],
    ids=["unknown-bucket", "wrong-secret", "closed-port"],
)  # fmt: skip
def test_weir_run_with_unusable_s3_storage_fails_at_the_start_naming_the_url_and_the_fix(
    s3: S3Place,
    tmp_path: Path,
    job_file: Path,
    run_weir: Callable[..., WeirResult],
    bucket: str,
    change: dict[str, str],
    fix: str,
) -> None:
    ports = {"s3port": s3.server.ports["s3.port"], "closed": free_port()}
    env = {**s3.env, **{k: v.format(**ports) for k, v in change.items()}}
    url = f"s3://{bucket}/{s3.prefix}"
    r = run_weir(
        "run", str(job_file), "--checkpoint-dir", url, "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "state"), env=env, timeout=30,
    )  # fmt: skip
    assert r.rc == 1, r.stderr
    assert r.error_lines() == [f"weir: error: cannot list {url}/t1: {fix.format(**ports)}"]
    assert SECRET_KEY not in r.stderr + r.stdout and "not-the-secret" not in r.stderr
    assert not (tmp_path / "s3:").exists() and not (tmp_path / "state" / "checkpoints").exists()


def test_stop_with_a_savepoint_exported_to_s3_restores_from_its_url(
    s3: S3Place,
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    job = _generator_job(tmp_path)
    server = weir_server(
        job, "--source", GENERATOR, "--parallelism", "2", state_dir=state, env=s3.env
    )
    wait_until(lambda: _records_in(server) > 500, 20.0, what="records to flow")
    r = run_weir(
        "stop", STATE, "--savepoint", "--savepoint-dir", s3.url, "--state-dir", str(state),
        env=s3.env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert server.proc.wait(20) == 0, server.stderr()
    line = r.stdout.strip()
    assert line.startswith("job t1 stopped with savepoint ") and f": {s3.url}/t1/chk-" in line
    url = line.rpartition(": ")[2]
    n = int(url.rpartition("chk-")[2])
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    exported = CheckpointStorage(s3.url, STATE)
    assert exported.ids() == [n] and exported.problem(n) is None
    assert exported.metadata(n)["savepoint"] is True
    assert exported.retain(0) == [], "retention deleted a savepoint"

    restored = weir_server(
        job, "--source", GENERATOR, "--restore", url, state_dir=tmp_path / "fresh", env=s3.env
    )
    wait_until(lambda: _records_in(restored) > 0, 20.0, what="the restored job to read")
    assert restored.client().get("/jobs/t1/checkpoints").json()["restored_from"] == url
    assert f"restored from {url}" in restored.stderr()
