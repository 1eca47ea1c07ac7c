"""The docs' examples (docs/examples/), run as a reader runs them.

Each page includes its examples with pymdownx.snippets (``--8<-- "examples/NAME.py"``), and
beside each script is what it prints (``NAME.out``, included by the page too): the script
runs in an empty directory with this venv's Python and its output must equal the file byte for
byte. ``test_*.py`` examples are pytest modules a reader copies: pytest runs them and they must
pass. So a page cannot show an example that does not run, nor output the example does not
print.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("test_"))
TEST_MODULES = sorted(EXAMPLES.glob("test_*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_example_prints_what_its_page_shows(script: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode() == script.with_suffix(".out").read_text()


@pytest.mark.parametrize("module", TEST_MODULES, ids=lambda p: p.name)
def test_an_example_test_module_passes(module: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout.decode()
    assert " passed" in out.stdout.decode() and "skipped" not in out.stdout.decode()


def test_every_example_is_on_a_page_and_every_output_has_its_script() -> None:
    pages = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    assert SCRIPTS and TEST_MODULES
    for example in [*SCRIPTS, *TEST_MODULES]:
        assert f'--8<-- "examples/{example.name}"' in pages, f"no page includes {example.name}"
    for output in EXAMPLES.glob("*.out"):
        assert output.with_suffix(".py").exists(), f"{output.name} has no script"
