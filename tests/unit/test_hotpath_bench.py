"""``loadtest.hotpath``: the CPU-per-event figure runs the bench's job to the end of its input."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.hotpath import cpu_per_event


@pytest.mark.parametrize("workload", ["sliding", "sparse"])
def test_cpu_per_event_reads_every_event(tmp_path: Path, workload: str) -> None:
    got = cpu_per_event(workload, 3_000, tmp_path, no_status=True)
    assert got["events"] == 3_000
    assert got["events_per_thread_cpu_s"] >= got["events_per_process_cpu_s"] > 0
    assert got["events_per_s"] > 0
    assert [p.name for p in tmp_path.iterdir()] == [
        f"events-3000-{1 if workload == 'sparse' else 0.1:g}.jsonl"
    ]
