"""``ApiMembers`` keeps ``--api-workers``' member processes running: one that crashes is
started again. A replacement that could not start (``OSError`` from the fork: out of processes
or memory) killed the monitor thread, and from then on no member was ever replaced. Now it
says so and tries again at the next pass."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from tests.support import wait_until
from weir.api.settings import ApiSettings
from weir.app import api_workers
from weir.app.api_workers import ApiMembers, MemberSpec

FLAG = "WEIR_TEST_MEMBER_FLAG"


def _member(spec: MemberSpec) -> None:
    """The first member crashes at once; the others run until they are stopped."""
    flag = Path(os.environ[FLAG])
    if not flag.exists():
        flag.touch()
        os._exit(3)
    time.sleep(120)


def test_a_member_that_cannot_be_replaced_at_once_is_replaced_at_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(FLAG, str(tmp_path / "crashed"))
    spec = MemberSpec("job.py", tmp_path, None, 0, ApiSettings())
    members = ApiMembers(spec, 1, _member, restart_delay_s=0.05)
    spawn = members._spawn
    tries: list[int] = []

    def failing_once() -> object:
        tries.append(1)
        if len(tries) == 2:  # the first replacement
            raise OSError(11, "Resource temporarily unavailable")
        return spawn()

    members._spawn = failing_once  # type: ignore[method-assign,assignment]
    with caplog.at_level(logging.WARNING, logger=api_workers.__name__), members:
        wait_until(lambda: members.restarts == 1, 60.0, what="the member to be replaced")
        pid = members.pids[0]
        assert wait_until(lambda: os.path.exists(f"/proc/{pid}"), 5.0, what="it to run")
    assert len(tries) == 3
    assert "could not be replaced" in caplog.text and "Resource temporarily" in caplog.text
