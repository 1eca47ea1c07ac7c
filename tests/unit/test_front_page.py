"""The repository's front page: at most 300 lines, its example is the quickstart's (which a
test runs), and every link it has resolves to a file of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "getting-started" / "quickstart"
CANDIDATES = (ROOT / "README.md",)


def _front() -> tuple[Path, str]:
    for path in CANDIDATES:
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) <= 300:
            return path, text
    raise AssertionError(
        "README.md is longer than 300 lines: it is the front page; the manual is docs/"
    )


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_the_front_pages_example_is_the_quickstarts() -> None:
    _, text = _front()
    assert (QUICKSTART / "job.py").read_text() in _blocks(text, "python")
    commands = _blocks(text, "sh")
    run = (QUICKSTART / "run.sh").read_text()
    query = (QUICKSTART / "query.sh").read_text()
    assert any(run + query == block for block in commands)
    assert any("make demo" in block and "make test" in block for block in commands)


def test_every_link_of_the_front_page_resolves() -> None:
    path, text = _front()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if not link.startswith(("http://", "https://")):
            assert (ROOT / link).exists(), f"{path.name} links to {link}, which does not exist"
