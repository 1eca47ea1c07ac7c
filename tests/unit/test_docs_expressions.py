"""The expressions reference page's examples: each is a file under docs/reference/expressions/
that runs here (its asserts are the page's claims), and the page shows each file whole, so the
two cannot drift. Also the page's ``weir explain`` text, from the example job itself."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from weir.engine import explain
from weir.engine.runtime.loader import load_job

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "expressions.md"
EXAMPLES = sorted((ROOT / "docs" / "reference" / "expressions").glob("*.py"))
BLOCK = re.compile(r"```python\n# (docs/reference/expressions/\S+\.py)\n(.*?)```", re.S)


def _shown() -> dict[str, str]:
    return {path: body for path, body in BLOCK.findall(PAGE.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_each_example_runs_and_the_page_shows_it_whole(example: Path) -> None:
    runpy.run_path(str(example), run_name="__example__")
    shown = _shown().get(str(example.relative_to(ROOT)))
    assert shown == example.read_text(encoding="utf-8"), f"{PAGE.name} shows {example.name} "
    "differently: copy the file into the page"


def test_the_page_shows_no_example_that_is_not_a_file() -> None:
    assert sorted(_shown()) == [str(p.relative_to(ROOT)) for p in EXAMPLES]


def test_the_pages_explain_text_is_the_example_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_COLUMNAR", "auto")  # the page shows the default's plan
    text = explain.render(explain.describe(load_job(EXAMPLES[0].parent / "job.py")))
    page = PAGE.read_text(encoding="utf-8")
    shown = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    got = text.splitlines()[1:]  # the job's own line aside
    assert [line.split("  time:")[1] if "  time:" in line else line for line in shown] == [
        line.split("  time:")[1] if "  time:" in line else line for line in got
    ]
