"""The bare-Python floor (``benchmarks.floor``) runs the bench job's steps over real JSONL lines
and refuses what the engine would send to the dead letters."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmarks.floor import STEP_NAMES, floor
from tests.support.workloads import write_ads


def test_the_floor_times_every_step_of_a_generated_file(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    write_ads(data, 5_000, 100, step_ms=1.0)
    out = floor(data.read_bytes().splitlines(), batch=512)
    assert set(out["ns_per_event"]) == set(STEP_NAMES)
    assert out["events_per_thread_cpu_s"] > 0
    assert all(ns >= 0 for ns in out["ns_per_event"].values())


def test_the_floor_takes_well_formed_events_only() -> None:
    bad = orjson.dumps({"id": 7, "event": "impression", "ts": 1, "value": 1})
    with pytest.raises(ValueError, match="well-formed"):
        floor([bad], batch=8)
