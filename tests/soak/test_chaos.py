"""The chaos run, shortened (``make chaos`` runs the long one; ``benchmarks.chaos``): 40 s of
input to the state-machine job, one fault of each kind at seeded random times (kill -9 of a
worker, of the job manager and of ``weir api``, a second job manager against the same storage,
S3 stopped and Kafka paused for 3 s). No invalid transition, every window equal to the model,
every output exactly once, every fault recovered from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.chaos.faults import KINDS
from benchmarks.chaos.run import chaos

pytestmark = pytest.mark.timeout(600)


def test_a_short_chaos_run_is_exactly_once(tmp_path: Path) -> None:
    report = chaos(tmp_path, seconds=40.0, seed=7, rate=200.0, repeat=1, outage_s=3.0)
    shown = json.dumps({k: v for k, v in report.items() if k != "faults"}, indent=1)
    assert report["ok"], json.dumps(report, indent=1)
    assert report["fault_counts"] == dict.fromkeys(KINDS, 1), shown
    assert report["verdict"]["invalid"] == [] and report["verdict"]["duplicates"] == 0
    assert report["jobmanager_starts"] >= 2 and report["api_starts"] >= 2, shown
    assert all(f["recovery_s"] < 120 for f in report["faults"]), shown
