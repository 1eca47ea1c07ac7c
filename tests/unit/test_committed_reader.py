"""``CommittedReader`` replacing its view: a view whose close fails (an ``OSError`` from RocksDB
or from removing its files) does not stop the reader from moving on to newer checkpoints. The
views are stand-ins: this isolates the reader's bookkeeping (the HTTP path over real
checkpoints is ``tests/security/test_http_freshness.py``)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import wait_until
from weir.api.committed import CommittedReader


class View:
    def __init__(self, n: int, fails: set[int]) -> None:
        self.id, self.time, self.shared = n, n * 1000, set()
        self._fails = fails
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.id in self._fails:
            raise OSError(f"view {self.id}: device busy")


def test_a_view_that_fails_to_close_does_not_stop_the_replacements(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opened: list[View] = []

    def opener(storage: Any, n: int, workdir: Path) -> View:
        opened.append(View(n, fails={1}))
        return opened[-1]

    storage = SimpleNamespace(store=SimpleNamespace(remote=False))
    reader = CommittedReader(storage, tmp_path, opener=opener)  # type: ignore[arg-type]

    def answers(n: int) -> bool:
        view = reader.view(n)
        return view is not None and view.id == n

    assert answers(1)
    for n in (2, 3, 4):  # each replacement retires the view before and closes the one before it
        with caplog.at_level(logging.WARNING, logger="weir.api.committed"):
            wait_until(lambda n=n: answers(n), 5.0, what=f"checkpoint {n}")  # type: ignore[misc]
    assert [v.id for v in opened] == [1, 2, 3, 4]  # each opened once: none leaked by a retry
    assert opened[0].closed and opened[1].closed and not opened[3].closed
    assert any("view 1: device busy" in r.getMessage() for r in caplog.records)
    reader.close()
    assert all(v.closed for v in opened)
