"""Starting a SparkSession that Ctrl-C can abandon within seconds.

PySpark starts its JVM (with SIGINT ignored), waits for it to write its port, then builds the
SparkContext through Py4J calls that take tens of seconds on a busy machine. A Ctrl-C that
unwound through that wait would leave the JVM running and Py4J logging tracebacks; held until
``getOrCreate`` returned, it took a minute or more to be acted on. So the session is made in a
thread of its own while the main thread waits, where the command's SIGINT handler runs at once
(it says what is being stopped): on ``KeyboardInterrupt`` the JVMs this start launched are
killed, which ends the starting thread's wait, and the interrupt is raised at once.

The JVMs are killed, and seen dead, before the command's handler runs: a JVM writes its own
start-up lines to the same stderr, and one still alive after ``weir: interrupted (Ctrl-C), …``
would put its line below the one that was meant to end the output.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ABANDON_S = 3.0  # how long an abandoned start may take to notice its JVM is gone
DEAD_S = 2.0  # how long a killed JVM may take to be gone (a zombie, or reaped)


def get_or_create(builder: Any) -> Any:
    """``builder.getOrCreate()``; a ``KeyboardInterrupt`` while it starts kills the JVMs it
    launched and is raised at once. PySpark's context, made outside the main thread, installs
    no SIGINT handler of its own (one that would cancel every job)."""
    if threading.current_thread() is not threading.main_thread():
        return builder.getOrCreate()  # signals reach only the main thread
    made: list[Any] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            made.append(builder.getOrCreate())
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failed.append(exc)

    before = _children()
    previous = signal.getsignal(signal.SIGINT)
    # a Python handler (the command's, or KeyboardInterrupt's default) runs after the JVMs are
    # gone; SIGINT ignored, or left to the system, is left as it is
    chained = previous if callable(previous) else None

    def interrupted(signum: int, frame: Any) -> None:
        _kill(_children() - before)  # first: no JVM line may come after the command's own
        assert chained is not None
        chained(signum, frame)

    starting = threading.Thread(target=start, name="weir-spark-start", daemon=True)
    if chained is not None:
        signal.signal(signal.SIGINT, interrupted)
    try:
        starting.start()
        while starting.is_alive():
            starting.join(0.1)  # the main thread stays where a SIGINT handler can run
    except KeyboardInterrupt:
        _abandon(starting, before)
        raise
    finally:
        if chained is not None:
            signal.signal(signal.SIGINT, chained)
    if failed:
        raise failed[0]
    return made[0]


def _abandon(starting: threading.Thread, before: set[int]) -> None:
    """Kill the JVMs (and what they started) that this start launched, then give its thread
    a moment to see them gone; a session that exists by then is stopped."""
    launched = _children() - before
    _kill(launched)
    log.info("spark start-up abandoned: killed pids=%s", sorted(launched))
    starting.join(ABANDON_S)


def _kill(launched: set[int]) -> None:
    """SIGKILL each of ``launched`` and what it started, and wait (up to ``DEAD_S``) until
    none of them runs: whatever they wrote is in the pipe by then."""
    # the starting thread's Py4J call fails as its JVM goes: that is the point, not news
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    killed = [each for pid in sorted(launched) for each in (*_descendants(pid), pid)]
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + DEAD_S
    while any(_running(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.005)


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (``/proc/<pid>/stat``'s state)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def _children(pid: int | None = None) -> set[int]:
    """The child processes of ``pid`` (this process by default), from ``/proc``."""
    found: set[int] = set()
    tasks = Path(f"/proc/{pid or os.getpid()}/task")
    try:
        for task in tasks.iterdir():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (task / "children").read_text().split())
    except OSError:
        pass
    return found


def _descendants(pid: int) -> list[int]:
    below = []
    for child in _children(pid):
        below += [*_descendants(child), child]
    return below
