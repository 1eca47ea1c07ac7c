"""One run per state directory: an exclusive ``flock`` on ``<state-dir>/<job>/run.lock``.

The job manager takes it before it touches anything in the job's directory (old worker state,
the status file, the control key) and holds it for the run. The kernel releases a ``flock``
when its descriptor closes, so a run that ends in any way, ``kill -9`` included, leaves no
stale lock behind. A second run of the same job on the same state directory therefore fails at
once, naming the process that holds it (its pid is written into the file after locking), and
deletes nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from weir.base.errors import ConfigError
from weir.base.files import FILE_MODE, private_dir

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"


class RunLock:
    """The lock of one job's state directory, held from ``acquire`` until ``release``."""

    def __init__(self, job_dir: Path, job: str) -> None:
        self.path = job_dir / LOCK_FILE
        self._job = job
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Lock, or raise ``ConfigError`` naming the pid of the run that holds the lock."""
        private_dir(self.path.parent, own=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise ConfigError(
                f"job {self._job!r} is already running on state directory "
                f"{self.path.parent.parent} (pid {holder}, holding {self.path}); stop it "
                f"(weir stop {self._job}) or pass another `state_dir`"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        log.debug("job=%s locked %s", self._job, self.path)

    def release(self) -> None:
        """Unlock (the file stays: removing it would let two runs lock two different files)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


__all__ = ["LOCK_FILE", "RunLock"]
