"""Reading files from a directory that others may write (a live backfill's), without a window
between checking a name and reading what it names.

Every component below the trusted root is opened relative to the one before it with
``O_NOFOLLOW`` (a symlink planted anywhere on the way is refused, never followed), a file with
``O_NOFOLLOW | O_NONBLOCK`` (a FIFO cannot block the opener) and judged by ``fstat`` on that very
descriptor: only a regular file of the size the check recorded is read, and it is read from the
descriptor into a private copy, so what is ingested is what was opened.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "kg-1.sst").write_bytes(b"x")
    >>> with open_dir(root, root) as d:
    ...     regular_files(d, "kg-*.sst", str(root))
    [('kg-1.sst', 1)]
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from weir.base.errors import StateError
from weir.base.files import open_private

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


@contextmanager
def open_dir(root: Path, path: Path) -> Iterator[int]:
    """A descriptor of directory ``path`` (under ``root``, both resolved), each component below
    ``root`` opened with ``O_NOFOLLOW`` relative to its parent. ``StateError`` when one is a
    symlink or not a directory (any more)."""
    parts = path.relative_to(root).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                where = root.joinpath(*parts[: i + 1])
                raise StateError(
                    f"backfill directory {where} cannot be opened as a directory "
                    f"({exc.strerror}); a symlink is never followed there"
                ) from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def regular_files(dir_fd: int, pattern: str, shown: str) -> list[tuple[str, int]]:
    """The names in ``dir_fd`` matching ``pattern``, each with its size, in name order;
    ``StateError`` names the first that is not a regular file (a symlink, a FIFO, a device)."""
    found = []
    for name in sorted(n for n in os.listdir(dir_fd) if fnmatch.fnmatchcase(n, pattern)):
        fd, size = open_regular(dir_fd, name, shown)
        os.close(fd)
        found.append((name, size))
    return found


def open_regular(dir_fd: int, name: str, shown: str, size: int | None = None) -> tuple[int, int]:
    """A descriptor of regular file ``name`` in ``dir_fd`` and its size; ``size``: the only
    size it may have. ``StateError`` (naming ``shown/name``) otherwise."""
    where = f"{shown}/{name}"
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError as exc:
        why = (
            "is a symbolic link"
            if exc.errno == errno.ELOOP
            else f"cannot be opened ({exc.strerror})"
        )
        raise StateError(f"backfill file {where} {why}; backfill files are regular files") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise StateError(
            f"backfill file {where} is not a regular file (mode {stat.filemode(st.st_mode)}); "
            "backfill files are regular files"
        )
    if size is not None and st.st_size != size:
        os.close(fd)
        raise StateError(
            f"backfill file {where} has {st.st_size} bytes, not the {size} checked when the "
            "backfill was asked for: it changed since; load it again"
        )
    return fd, st.st_size


def copy_out(dir_fd: int, name: str, shown: str, size: int, into: Path) -> Path:
    """A private copy at ``into`` of regular file ``name`` (of ``size`` bytes), read from the
    descriptor that was checked; ``StateError`` if it is not one, or not that size."""
    fd, _ = open_regular(dir_fd, name, shown, size)
    left = size
    try:
        with os.fdopen(open_private(into), "wb") as out:
            while left > 0:
                chunk = os.read(fd, min(_CHUNK, left))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
    finally:
        os.close(fd)
    if left:
        into.unlink(missing_ok=True)
        raise StateError(f"backfill file {shown}/{name} was cut short while it was read")
    return into


__all__ = ["copy_out", "open_dir", "open_regular", "regular_files"]
