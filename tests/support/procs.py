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


def worker_pids(pid: int) -> list[int]:
    """A ``weir run``'s worker processes: its children running multiprocessing's spawn_main
    (not its resource tracker), in start order."""
    found = []
    for child in children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmd:
            found.append(child)
    return sorted(found)


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
