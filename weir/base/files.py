"""Files weir writes for itself (state, checkpoints, status), created private to the user and
made durable where a crash must not lose them.

Modes are given explicitly here and not left to the umask: ``weir.testing`` and programs that
embed the engine never pass through the command line, which sets ``umask 077``. A directory
that exists already belongs to the user and keeps its mode; only the directories weir creates
are made ``0700`` (and the job's own directories, which ``private_dir(..., own=True)`` tightens
even when an older weir created them open).

``fsync_dir`` completes a rename or a new file: POSIX makes a file's data durable with
``fsync`` on the file, but its name only with ``fsync`` on the directory holding it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path, *, own: bool = False) -> Path:
    """Create ``path`` and any missing parents as ``0700`` directories. ``own``: the directory
    is the job's own (``<state-dir>/<job>``, ``<checkpoint-dir>/<job>``), so an existing one
    is made ``0700`` too."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(d, DIR_MODE)  # mkdir's mode passes through the umask, which may drop bits
    if own and not missing and path.is_dir() and (path.stat().st_mode & 0o777) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


@contextmanager
def replacing(path: Path, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A new file that replaces ``path`` atomically once the block ends (a temporary name in
    the same directory, then a rename), created ``0600`` so nobody else can read it even for a
    moment; removed if the block fails. ``durable``: its data is synced before the rename (the
    rename itself is durable once the directory is synced)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with os.fdopen(open_private(tmp), "wb") as fh:
            yield fh
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_private(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically and privately (``replacing``). ``durable``:
    the data and the rename are synced to disk before it returns."""
    with replacing(path, durable=durable) as fh:
        fh.write(data)
    if durable:
        fsync_dir(path.parent)


def open_private(path: Path) -> int:
    """A new (or truncated) file at ``path``, ``0600``, open for writing: its descriptor."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)


def fsync_dir(path: Path) -> None:
    """Make the names in directory ``path`` (new files, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def hold_shared_lock(path: Path) -> int:
    """A shared ``flock`` on ``path`` (created ``0600``), held until the process exits: the
    descriptor is never closed, so the kernel releases it however the process ends."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def wait_unlocked(path: Path, timeout_s: float) -> bool:
    """Wait until nobody holds a ``flock`` on ``path`` (an exclusive one is taken and let go
    at once); False at the deadline. A missing file or directory is nobody's."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
    finally:
        os.close(fd)


def remove_tree(path: Path, attempts: int = 5) -> None:
    """``shutil.rmtree(path)``, again when another process added a file meanwhile (a state
    reader announcing itself in a worker's directory: ``state.walgate``).

    Raises:
        OSError: it is still there after ``attempts`` tries.
    """
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.01)


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "fsync_dir",
    "hold_shared_lock",
    "open_private",
    "wait_unlocked",
    "private_dir",
    "remove_tree",
    "replacing",
    "write_private",
]
