"""A reader working through a tutorial page: its files copied into an empty directory, its
commands run there as the page shows them (``sh run.sh``, ``python send.py``, ``weir …``), with
this venv's ``weir`` and ``python`` first on ``PATH`` (where pip installed them for the reader).

The one substitution is the API port: the page's 8000 may be taken on a shared machine, so a
long-running command gets ``WEIR_API_PORT=0`` (a free port, printed in its ``serving on`` line).
Every long-running command is stopped by Ctrl-C (SIGINT to its process group) when the test
ends, then killed if it has not exited within 20 s.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import wait_until

SERVING = re.compile(r"weir: job (\S+) serving on (http://127\.0\.0\.1:\d+)\n")


def any_checkpoint(answer: str) -> str:
    """A state answer with its checkpoint's number, which depends on timing, made ``N``."""
    return re.sub(r'"checkpoint": (?:null|\d+)', '"checkpoint": N', answer)


class Reader:
    """A terminal in ``root`` holding a tutorial's files; ``env`` is added to the shell's."""

    def __init__(self, root: Path, *folders: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        for path in (p for folder in folders for p in folder.iterdir()):
            if path.is_file() and not path.name.endswith(".out"):
                shutil.copy(path, root / path.name)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env["WEIR_API_PORT"] = "0"
        self.env.update(env or {})
        self._running: list[subprocess.Popen[bytes]] = []

    def rewrite(self, changes: dict[str, str]) -> None:
        """Put this machine's addresses where the page's are, in every copied file (a port,
        a bucket prefix, a Spark master that differ here)."""
        for path in self.root.iterdir():
            if path.is_file():
                text = path.read_text()
                for old, new in changes.items():
                    text = text.replace(old, new)
                path.write_text(text)

    def attempt(self, *argv: str, timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
        """Run a command to its end, whatever its exit code."""
        return subprocess.run(
            list(argv), cwd=self.root, env=self.env, capture_output=True, timeout=timeout
        )

    def run(self, *argv: str, timeout: float = 120.0) -> str:
        """Run a command to its end; its stdout (it must exit 0, else the error shows both)."""
        out = self.attempt(*argv, timeout=timeout)
        assert out.returncode == 0, f"{argv} exited {out.returncode}:\n{out.stdout.decode()}\n" + (
            out.stderr.decode()
        )
        return out.stdout.decode()

    def start(self, script: str, log: str) -> subprocess.Popen[bytes]:
        """``sh script`` in the background (a second terminal), its output in ``log``."""
        with open(self.root / log, "wb") as out:
            proc = subprocess.Popen(
                ["sh", script],
                cwd=self.root,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._running.append(proc)
        return proc

    def serving(self, proc: subprocess.Popen[bytes], log: str, timeout: float = 60.0) -> str:
        """The base URL ``weir run`` printed in ``log``, once it has."""

        def url() -> str | None:
            text = (self.root / log).read_text(errors="replace")
            assert proc.poll() is None, f"{log}: exited {proc.returncode}:\n{text}"
            found = SERVING.search(text)
            return found.group(2) if found else None

        return wait_until(url, timeout, 0.1, what=f"{log} to serve")

    def lines(self, name: str) -> list[str]:
        """The lines of a file the job writes (none before it exists)."""
        path = self.root / name
        return path.read_text().splitlines() if path.exists() else []

    def stop_all(self) -> None:
        """Ctrl-C to what is still running, then kill after 20 s."""
        for proc in self._running:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
