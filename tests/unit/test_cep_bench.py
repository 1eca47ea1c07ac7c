"""The CEP benchmark's job holds its pattern operator, and the bench gate knows its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import cep_bench, gate
from weir.engine.cep import patterns_of
from weir.engine.runtime.loader import load_job


def test_the_bench_job_holds_its_pattern(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text(cep_bench.JOB.format(path="/unused.jsonl"))
    assert patterns_of(load_job(path)) == ["clicked-after-two"]


@pytest.mark.parametrize(
    ("figure", "better"),
    [
        ("cep.three_step.p1.events_per_s", "higher"),
        ("cep.three_step.p2_over_p1", "higher"),
        ("cep.three_step.p1.seconds", "lower"),
    ],
)
def test_the_gate_knows_which_way_each_cep_figure_is_better(figure: str, better: str) -> None:
    assert gate.direction(figure) == better
