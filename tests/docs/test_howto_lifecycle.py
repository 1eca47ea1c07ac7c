"""The lifecycle how-to (docs/how-to/lifecycle.md), worked through as written: the quickstart's
job run with checkpoints, stopped with a savepoint, and its new version (a filter added, the
operator's name kept) restored from it at parallelism 4, answering the first run's windows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.tutorial import Reader, any_checkpoint

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = DOCS / "examples" / "lifecycle"
QUICKSTART = DOCS / "getting-started" / "quickstart"
PAGE = DOCS / "how-to" / "lifecycle.md"
PAGE_URL = "http://127.0.0.1:8000"


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    reader = Reader(tmp_path, QUICKSTART, FILES)
    try:
        yield reader
    finally:
        reader.stop_all()


def _final_answer(reader: Reader, url: str) -> str:
    query = (FILES / "query.sh").read_text().replace(PAGE_URL, url)

    def answer() -> str | None:
        out = reader.attempt("sh", "-c", query).stdout.decode()
        return out if '"watermark": 9223372036854775807' in out else None

    return any_checkpoint(wait_until(answer, 60, 0.5, what="every window final"))


def test_stop_with_a_savepoint_and_restore_the_new_version_at_parallelism_4(
    reader: Reader,
) -> None:
    want = any_checkpoint((FILES / "query.sh.out").read_text())
    first = reader.start("run.sh", "run.log")
    assert _final_answer(reader, reader.serving(first, "run.log")) == want
    stopped = reader.run("sh", "stop.sh")
    assert re.fullmatch(r"job clicks finished with savepoint \d+: \S+/clicks/chk-\d+\n", stopped)
    assert first.wait(30) == 0

    second = reader.start("restore.sh", "restore.log")
    assert _final_answer(reader, reader.serving(second, "restore.log")) == want
    log = (reader.root / "restore.log").read_text()
    assert "started workers=4 restored from" in log


def test_the_page_includes_every_file() -> None:
    text = PAGE.read_text()
    for path in FILES.iterdir():
        assert f'--8<-- "examples/lifecycle/{path.name}"' in text, f"the page lacks {path.name}"
