"""Whether a job file may run: a job file is code, and so is every module beside it that the job
(or weir) imports, so a file or directory that another account can write would let that
account run code as whoever runs weir. weir judges them as OpenSSH's ``StrictModes`` judges
``authorized_keys``:

- the job file, and every directory from ``/`` down to it, must be owned by this user or root;
- none may be writable by other users: world-writable, or group-writable by a group that is not
  this user's own private group (the group named as the user, holding nobody else);
- a world-writable directory with the sticky bit (``/tmp``) is allowed, since others cannot
  replace what is in it, but a job file directly in one gets a WARNING: others can still add
  modules beside it, which only the job's own imports could pick up (the job's directory comes
  after the standard library and site-packages on ``sys.path``).

Example:
    >>> from pathlib import Path
    >>> check_job_path(Path("/etc/hostname"))  # owned by root, mode 0644: trusted
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
from pathlib import Path

from weir.base.errors import JobDefinitionError

log = logging.getLogger(__name__)


def check_job_path(path: Path) -> None:
    """Refuse ``path`` (a job file or a module it names) if another user could change it.

    Args:
        path: the job file; it must exist.

    Raises:
        JobDefinitionError: the file, or a directory above it, is owned by another user or
            writable by other users; the message names which and the fix.
    """
    resolved = path.resolve()
    me = os.geteuid()
    _check_one(resolved, path, me, is_dir=False)
    shared_parent: Path | None = None
    for directory in resolved.parents:
        if _check_one(directory, path, me, is_dir=True) and directory == resolved.parent:
            shared_parent = directory
    if shared_parent is not None:
        log.warning(
            "job=%s dir=%s: the job file's directory is writable by every user (sticky); "
            "others can add modules beside it that the job's own imports would load: "
            "keep job files in a directory only you can write",
            path,
            shared_parent,
        )


def _check_one(target: Path, job: Path, me: int, *, is_dir: bool) -> bool:
    """Raise when others can change ``target``; True when it is a sticky world-writable
    directory (allowed, but worth a warning beside a job file)."""
    st = target.stat()
    what = "directory" if is_dir else "file"
    if st.st_uid not in (me, 0):
        raise JobDefinitionError(
            f"job {job}: the {what} {target} belongs to {_user(st.st_uid)}, not to you or "
            f"root; whoever owns it can change what weir runs as you: copy the job to a "
            "directory of your own"
        )
    mode = stat.S_IMODE(st.st_mode)
    sticky = is_dir and bool(mode & stat.S_ISVTX)
    if mode & stat.S_IWOTH and not sticky:
        raise JobDefinitionError(
            f"job {job}: the {what} {target} is writable by every user (mode {mode:04o}), so "
            f"anyone could change what weir runs as you: chmod o-w {target}"
        )
    if mode & stat.S_IWGRP and not sticky and not _private_group(st.st_gid, me):
        raise JobDefinitionError(
            f"job {job}: the {what} {target} is writable by group {_group(st.st_gid)} "
            f"(mode {mode:04o}), so its members could change what weir runs as you: "
            f"chmod g-w {target}"
        )
    return sticky and bool(mode & stat.S_IWOTH)


def _private_group(gid: int, uid: int) -> bool:
    """Is ``gid`` the user-private group of ``uid`` (named as the user, no other member)?"""
    try:
        user = pwd.getpwuid(uid).pw_name
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return str(gid)
