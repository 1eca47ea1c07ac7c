"""A window operator without a sink builds no result records when windows fire (it is only
queried), yet counts them and ranks the fired window's top-N exactly as one with a sink does.
Both run in a real worker, in this process, over the same JSONL file with late updates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks.bench import finished_worker
from tests.support.workloads import write_ads
from weir.engine.runtime.stored.ranking import best

JOB = """
from weir import Job, WatermarkStrategy, agg, sinks, sources, windows
job = Job("unsunk")
(
    job.source(sources.jsonl({data!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window({window}, allowed_lateness_ms=200)
    .aggregate("stats", count=agg.count(), total=agg.sum("value"), avg=agg.mean("value"))
){sink}
"""
WINDOWS = {
    "tumbling": "windows.tumbling(ms=1_000)",
    "sliding": "windows.sliding(size_ms=1_000, slide_ms=500)",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 500 ms of disorder against a 100 ms bound: late updates within lateness, and late records
    return write_ads(tmp_path_factory.mktemp("ads") / "ads.jsonl", 6_000, 50, step_ms=2.0)


def _run(tmp: Path, data: Path, window: str, sink: Path | None) -> Any:
    text = JOB.format(
        data=str(data),
        window=WINDOWS[window],
        sink="" if sink is None else f".sink(sinks.jsonl({str(sink)!r}))",
    )
    job_file = tmp / "job.py"
    job_file.write_text(text)
    worker = finished_worker(job_file, tmp / "state")
    return worker.keyed.ops["stats"]


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_unsunk_operator_counts_and_ranks_like_a_sunk_one(
    tmp_path: Path, data: Path, window: str
) -> None:
    out = tmp_path / "results.jsonl"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sunk = _run(tmp_path / "a", data, window, out)
    quiet = _run(tmp_path / "b", data, window, None)
    results = [orjson.loads(line) for line in out.read_bytes().splitlines()]

    assert sunk.emits and not quiet.emits
    assert quiet.results == []
    assert quiet.results_out == sunk.results_out == len(results) > 0
    assert any(not r["final"] for r in results)  # late updates were emitted, and counted
    assert quiet.tops.latest == sunk.tops.latest
    latest = quiet.tops.latest
    assert latest is not None
    fired = {
        r["key"]: r for r in results if (r["start"], r["end"]) == (latest["start"], latest["end"])
    }
    for name in ("count", "total", "avg"):
        expected = best(((k, r[name]) for k, r in fired.items()), 100)
        assert latest["by"][name] == expected, name
