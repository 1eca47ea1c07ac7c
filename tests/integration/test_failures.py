"""Bad runs fail fast and say why: one ``weir: error:`` line naming the offending value, and
no worker left behind holding the process up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WeirResult


@pytest.mark.parametrize("pattern", ["missing.jsonl", "missing-*.jsonl"])
@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_missing_input_file_is_a_clear_error(
    tmp_path: Path,
    write_job: Callable[..., Path],
    run_weir: Callable[..., WeirResult],
    pattern: str,
    parallelism: str,
) -> None:
    missing = tmp_path / pattern
    job = write_job(tmp_path / "unused.jsonl", bound=0, size=10, lateness=0)
    result = run_weir(
        "run", str(job), "--source", f"file://{missing}", "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "st"), "--parallelism", parallelism,
        timeout=30.0,  # startup takes ~1-3 s; a run that hangs on a dead worker fails here
    )  # fmt: skip
    assert result.rc == 1, result.stderr  # the workers find the file missing: a failed job
    errors = [line for line in result.error_lines() if line.startswith("weir: error:")]
    assert len(errors) == 1, result.stderr
    assert str(missing) in errors[0]
    assert "Traceback" not in result.stderr
