"""Paths that come from outside (flags, requests, checkpoint metadata) and must stay inside a
directory: one place decides, so every caller refuses ``..``, symlinks out and strangers alike."""

from __future__ import annotations

from pathlib import Path, PurePath
from urllib.parse import unquote, urlsplit

from weir.base.errors import ConfigError, PathRefused


def plain_name(name: str, what: str) -> str:
    """``name`` as one path component: not empty, no separator, not ``.`` or ``..``, no NUL."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise PathRefused(
            f"{what} {name!r} is not a plain file name; it must not be empty, '.', '..', or "
            "contain '/', '\\\\' or NUL"
        )
    return name


def confined(
    path: Path, root: Path, what: str, fix: str = "use a path inside that directory"
) -> Path:
    """``path`` resolved (symlinks followed), refused unless it is absolute, has no ``..``
    component and lies under ``root`` (itself resolved). Returns the resolved path."""
    if not path.is_absolute():
        raise PathRefused(f"{what} {str(path)!r} is not an absolute path; pass an absolute one")
    if ".." in PurePath(path).parts:
        raise PathRefused(f"{what} {str(path)!r} contains '..'; pass the directory itself")
    base = root.resolve()
    real = path.resolve()
    if not real.is_relative_to(base):
        via = f" (a symlink to {real})" if real != path else ""
        raise PathRefused(f"{what} {str(path)!r}{via} is not under {base}; {fix}")
    return real


__all__ = ["confined", "plain_name"]


def file_path(value: str, what: str) -> str | None:
    """The path that ``value`` names as a file: a plain path (``data/in.jsonl``) or a
    ``file:`` URL (``file:///data/in.jsonl``, ``file://localhost/…``); ``None`` for a URL of
    another scheme.

    Raises:
        ConfigError: a ``file://host/…`` URL, which would lose ``host`` from the path (the
            message names the ``file:///…`` it probably meant), or a file URL without a path.

    Example:
        >>> file_path("file:///tmp/x.jsonl", "source"), file_path("x.jsonl", "source")
        ('/tmp/x.jsonl', 'x.jsonl')
    """
    parts = urlsplit(value)
    if not parts.scheme:
        return value
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        meant = f"file:///{parts.netloc}{parts.path}"
        raise ConfigError(
            f"{what} {value!r} names host {parts.netloc!r}, which a file URL does not have; "
            f"a file URL has three slashes: {meant}"
        )
    path = unquote(parts.path)
    if not path:
        raise ConfigError(f"{what} {value!r} has no path; use file:///absolute/path or a path")
    return path
