"""The weir side of ``benchmarks/peer_bench.py`` on a small file job: its rate counts from the first
record read, and its workers' peak memory is sampled from ``/proc`` while they run."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.bench import JOB, TUMBLING
from benchmarks.peer_bench import peak_rss, weir_run
from tests.support.workloads import write_ads


def test_peak_rss_of_a_live_process_and_of_one_gone() -> None:
    assert peak_rss(os.getpid()) > 10 * 2**20  # a Python process with pytest loaded
    assert peak_rss(2**22 + 1) == 0  # above any pid Linux hands out


def test_weir_run_reports_rate_from_first_record_and_workers_peak_rss(tmp_path: Path) -> None:
    data = write_ads(tmp_path / "events.jsonl", 20_000, 500, step_ms=1.0)
    job = tmp_path / "job.py"
    job.write_text(JOB.format(path=str(data), window=TUMBLING))
    run = weir_run(job, tmp_path / "state", 2)
    assert run["events"] == 20_000
    assert run["events_per_s"] == round(20_000 / run["seconds"])
    # two worker processes, each a Python interpreter with the engine loaded
    assert run["peak_rss_mib"] > 2 * 20
