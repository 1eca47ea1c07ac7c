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
    # found before anything starts (issue 39 item 8): a usage error, no worker, no API
    assert result.rc == 2, result.stderr
    assert result.error_lines() == [
        f"weir: error: source 'source-0' reads {missing}, which does not exist; pass an "
        "existing JSONL file (a path or file:///path) or a glob"
        if "*" not in pattern
        else f"weir: error: source 'source-0': no input file matches {missing}; check the "
        "pattern, e.g. file:///data/*.jsonl"
    ]
