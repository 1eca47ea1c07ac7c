"""Fixtures for the attack and fault suite.

``stranger`` runs a Python snippet as another local account: when the tests run as root it drops
to an unprivileged uid with ``setpriv`` (the attacker of the audit, a second user on the same
host); otherwise it runs as the same user but without any of the job's secrets, which is the
weaker attacker every check here must also stop. The snippet uses the system interpreter and the
standard library only, so it needs nothing the attacker would not have.

``public_dir`` is a directory another account can traverse (``0755`` up to ``/``), like a
project directory or ``/tmp``: pytest's own ``tmp_path`` lives under a ``0700`` directory, which
would hide every file-mode mistake from the stranger.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

STRANGER_UID = 65534  # nobody
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


@dataclass(frozen=True)
class Stranger:
    """Runs code as another local account (``other_uid``) or, failing that, as a process that
    holds none of the job's secrets."""

    other_uid: bool

    def command(self, argv: list[str]) -> list[str]:
        if not self.other_uid:
            return argv
        return [
            "setpriv",
            f"--reuid={STRANGER_UID}",
            f"--regid={STRANGER_UID}",
            "--clear-groups",
            *argv,
        ]

    def run(self, code: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``code`` (standard library only) and return its result; never raises on a
        non-zero exit, so a test can assert on what the attacker saw."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
        return subprocess.run(
            self.command([SYSTEM_PYTHON, "-I", "-c", code]),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd="/",
        )

    def popen(self, code: str) -> subprocess.Popen[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
        return subprocess.Popen(
            self.command([SYSTEM_PYTHON, "-I", "-c", code]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd="/",
        )


@pytest.fixture(scope="session")
def stranger() -> Stranger:
    other = os.geteuid() == 0 and shutil.which("setpriv") is not None
    if other:
        probe = Stranger(True).run("import os; print(os.getuid())", timeout_s=10.0)
        assert probe.returncode == 0 and probe.stdout.strip() == str(STRANGER_UID), (
            f"setpriv to uid {STRANGER_UID} failed: {probe.stderr.strip()}"
        )
    return Stranger(other)


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A fresh directory that any local account can traverse (mode 0755, under /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="weir-sec-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
