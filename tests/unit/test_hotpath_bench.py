"""``benchmarks.hotpath``: the CPU-per-event figure runs the bench's job to the end of its input."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.hotpath import cpu_per_event


@pytest.mark.parametrize(
    ("workload", "keys", "step"),
    [("sliding", 10_000, 0.1), ("sparse", 10_000, 1), ("sparse", 1_000, 10), ("peer", 10**6, 0.1)],
)
def test_cpu_per_event_reads_every_event(
    tmp_path: Path, workload: str, keys: int, step: float
) -> None:
    got = cpu_per_event(workload, 3_000, tmp_path, no_status=True, keys=keys)
    assert got["events"] == 3_000
    assert got["events_per_thread_cpu_s"] >= got["events_per_process_cpu_s"] > 0
    assert got["events_per_s"] > 0
    # the events file is kept for the next run; the same windows per key at any number of keys
    assert [p.name for p in tmp_path.iterdir()] == [f"events-3000-{keys}-{step:g}.jsonl"]
