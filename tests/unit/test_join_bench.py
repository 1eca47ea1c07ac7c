"""The join benchmark's jobs are the joins it names, and the bench gate knows its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import gate, join_bench
from weir.engine.joins import joins_of
from weir.engine.runtime.loader import load_job


@pytest.mark.parametrize("kind", sorted(join_bench.JOINS))
def test_each_bench_job_holds_its_join(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "job.py"
    path.write_text(join_bench.JOB.format(path="/unused.jsonl", join=join_bench.JOINS[kind]))
    assert joins_of(load_job(path)) == [("joined", kind.replace("_", " "))]


@pytest.mark.parametrize(
    ("figure", "better"),
    [
        ("joins.window_join.p1.events_per_s", "higher"),
        ("joins.interval_join.p2.events_per_s", "higher"),
        ("joins.window_join.p2_over_p1", "higher"),
        ("joins.interval_join.p1.seconds", "lower"),
        ("joins.interval_join.p1.events", "info"),
    ],
)
def test_the_gate_knows_which_way_each_join_figure_is_better(figure: str, better: str) -> None:
    assert gate.direction(figure) == better
