"""``weir.base.procmem``: a process's resident set from ``/proc``."""

from __future__ import annotations

import doctest
import os

from weir.base import procmem


def test_this_process_and_another_are_measured_and_a_gone_one_is_zero() -> None:
    assert 10 * 2**20 < procmem.rss_bytes() < 2**33  # a Python process with pytest loaded
    assert 10 * 2**20 < procmem.rss_bytes(os.getpid()) < 2**33
    before = procmem.rss_bytes()
    touched = b"x" * 2**26  # 64 MiB, every page written
    assert procmem.rss_bytes() - before > 2**25
    del touched
    assert procmem.rss_bytes(2**22 + 1) == 0  # above any pid Linux hands out


def test_its_example_runs() -> None:
    failed, tried = doctest.testmod(procmem)
    assert tried >= 1 and failed == 0
