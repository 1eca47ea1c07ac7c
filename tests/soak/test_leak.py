"""The soak tier: a leak check of a real ``weir run`` under steady load (issue 9; ``make soak``
runs the 30-minute soak). The soak job at a fixed rate with the mixed query load beside it for
150 s, every process sampled every 2 s after a minute of warm-up: the least-squares slope of each
process's RSS (over the whole run or its later half: a rise that levels off is a warm-up) and
of its open descriptors stays within the bounds of ``benchmarks.soak``, the same
processes run throughout, the job keeps up and the queries are answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.soak import LEAK_BOUND_MIB_PER_MIN, leak_check

pytestmark = pytest.mark.timeout(360)


def test_two_minutes_of_steady_load_with_queries_grow_no_process(tmp_path: Path) -> None:
    report = leak_check(tmp_path)
    failed = [name for name, ok in report["checks"].items() if not ok]
    shown = {
        k: report[k]
        for k in (
            "rss_mib_per_min",
            "rss_late_mib_per_min",
            "rss_series_mib",
            "raw_series_mib",
            "fds_per_min",
        )
    }
    assert not failed, f"leak check failed: {failed}\n{json.dumps(shown, indent=1)}"
    assert report["samples"] >= 40
    assert len(report["rss_mib_per_min"]) == 3  # weir run and its two workers
    whole, late = report["rss_mib_per_min"], report["rss_late_mib_per_min"]
    assert all(min(whole[p], late[p]) <= LEAK_BOUND_MIB_PER_MIN for p in whole)
