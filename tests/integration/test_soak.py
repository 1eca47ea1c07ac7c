"""The soak's 3-minute version (issue 9; ``make soak`` runs 30 minutes): a real ``weir run`` at
70% of the rate it reached unthrottled, with checkpoints every 2 s, bounded retention and the
mixed query load beside it. After a 90 s warm-up, every process's RSS stays within +-10%,
open descriptors stay flat, checkpoint sizes stay steady, and the job keeps up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.soak import soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]


def test_three_minutes_at_70_percent_with_queries_keep_memory_and_files_flat(
    tmp_path: Path,
) -> None:
    report = soak(tmp_path, minutes=3, warmup_s=90, sample_s=10)
    failed = [name for name, ok in report["checks"].items() if not ok]
    shown = {k: report[k] for k in ("rss", "open_fds", "checkpoint_bytes", "events_per_s")}
    assert not failed, f"soak checks failed: {failed}\n{json.dumps(shown, indent=1)}"
    assert report["samples"] >= 8
    assert report["query_load"]["kinds"]["point"]["ok"] > 0
