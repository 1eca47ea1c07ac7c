"""Real ``weir`` processes for tests: one-shot commands (``run_weir``) and ``weir run`` servers
(``Servers``), every one started in its own process group and reaped; and ``S3Place``, a prefix
of the session's S3 bucket.

The fixtures in ``tests/conftest.py`` wrap these; test modules that share a server or a place
across their tests (module fixtures) use them directly.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import WEIR, WeirResult, WeirServer, wait_until
from tests.support.s3_server import S3Server

# the whole line, its newline included: a port read before its last digits were written is
# another port
SERVING = re.compile(r"weir: job (\S+) serving on (http://[\d.]+:(\d+))\n")
# `weir run --no-api` says this instead
HEADLESS = re.compile(r"weir: job (\S+) running without an API")
RUN_TIMEOUT_S = 60.0

# weir_env's type, for the fixture of that name
Env = Callable[[dict[str, str] | None], dict[str, str]]


def weir_env(extra: dict[str, str] | None) -> dict[str, str]:
    """This process's environment without any ``WEIR_*`` setting (a test names what it sets),
    plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_weir_in(
    cwd: Path, *args: str, timeout: float = RUN_TIMEOUT_S, env: dict[str, str] | None = None
) -> WeirResult:
    """Run ``weir *args`` in ``cwd`` to completion; kill its process group after ``timeout``.

    Raises:
        AssertionError: it did not finish in time (with its stderr).
    """
    proc = subprocess.Popen(
        [*WEIR, *args],
        cwd=cwd,
        env=weir_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"weir {' '.join(args)} did not finish in {timeout}s; stderr:\n"
            + err.decode(errors="replace")
        ) from None
    return WeirResult(proc.returncode, out.decode(errors="replace"), err.decode())


class Servers:
    """Starts ``weir run`` processes under ``root`` and stops every one of them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[WeirServer] = []

    def start(
        self,
        job_file: Path,
        *flags: str,
        state_dir: Path | None = None,
        timeout: float = 30.0,
        env: dict[str, str] | None = None,
        command: str = "run",
    ) -> WeirServer:
        """``command`` is ``run`` or ``api``; a ``run`` with ``--no-api`` has no base URL."""
        n = len(self.started)
        state = state_dir or self.root / f"state-{n}"
        stderr_path = self.root / f"server-{n}.stderr"
        ready = HEADLESS if "--no-api" in flags else SERVING
        argv = [*WEIR, command, str(job_file), "--api-port", "0", "--state-dir", str(state)]
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [*argv, *flags],
                cwd=self.root,
                env=weir_env(env),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        server = WeirServer(proc, "", "", state, stderr_path)
        self.started.append(server)

        def serving() -> re.Match[str] | None:
            text = server.stderr()
            assert proc.poll() is None, f"weir exited with {proc.returncode}:\n{text}"
            return ready.search(text)

        m = wait_until(serving, timeout, what=f"the {ready.pattern!r} line")
        server.job = m.group(1)
        server.base_url = m.group(2) if ready is SERVING else ""
        return server

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@dataclass(frozen=True)
class S3Place:
    """A fresh prefix of the session's bucket: ``url`` is ``s3://weir/<unique>``, ``env`` the
    AWS_* settings a client (or a ``weir`` process) needs to reach it."""

    server: S3Server
    prefix: str

    @property
    def url(self) -> str:
        return self.server.url(self.prefix)

    @property
    def env(self) -> dict[str, str]:
        return self.server.env


def unique_prefix(name: str) -> str:
    """``name`` made safe for an object key, with a random suffix: no two tests share one."""
    return f"{re.sub(r'[^A-Za-z0-9_-]+', '-', name)[:60]}-{uuid.uuid4().hex[:8]}"
