"""Finding a ``weir run``'s processes from outside, for tests and benchmarks that kill workers or
watch their memory (Linux ``/proc``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path


def children(pid: int) -> set[int]:
    """Process ids of ``pid``'s children (threads that end meanwhile are skipped)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> set[int]:
    """Process ids of ``pid``'s children, their children, and so on (a ``weir run``'s
    workers are its zygote's children)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        try:
            kids = children(todo.pop())
        except OSError:
            continue  # it ended meanwhile
        todo.extend(kids - found)
        found |= kids
    return found


def comm(pid: int) -> str:
    """The process's name (``/proc/<pid>/comm``: ``weir-worker``, ``java``), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (``R``, ``S``, ``T`` stopped, ``Z`` zombie...);
    None once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def cmdline(pid: int) -> bytes:
    """The process's command line (NUL-separated), b"" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def worker_pids(pid: int) -> list[int]:
    """A ``weir run``'s worker processes, in start order: forked by its zygote (named
    ``weir-worker``) or spawned (running multiprocessing's spawn_main; not its resource
    tracker)."""
    return sorted(
        p for p in descendants(pid) if comm(p) == "weir-worker" or b"spawn_main" in cmdline(p)
    )


def weir_run_pid(job_file: Path) -> int:
    """The ``weir run`` process (started as ``python -m weir run``) of ``job_file``."""
    pattern = "weir run " + re.escape(str(job_file))
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    if not out:
        raise RuntimeError(f"no weir run process for {job_file}")
    return int(out[0])


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds ``pids`` have used so far; a process gone meanwhile counts
    nothing (so a difference of two calls is at least what the survivors used)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15
    return total / _TICK
