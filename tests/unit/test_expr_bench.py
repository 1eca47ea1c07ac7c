"""``benchmarks.expr_bench``: both of its sections run and print a figure for every variant."""

from __future__ import annotations

import json

import pytest

from benchmarks import expr_bench


@pytest.mark.parametrize(
    ("args", "variants"),
    [
        ([], {"lambda", "expr", "reference", "lambda_more", "expr_more"}),
        (["--backfill"], {"lambda-lines", "expr-lines", "expr-columns"}),
    ],
)
def test_each_section_prints_every_variant(
    capsys: pytest.CaptureFixture[str], args: list[str], variants: set[str]
) -> None:
    expr_bench.main(["--events", "3000", "--rounds", "1", *args])
    got = json.loads(capsys.readouterr().out)
    assert set(got) == variants and all(v > 0 for v in got.values())
