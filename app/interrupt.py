"""Ctrl-C, the same for every command: at once, one line saying what is being stopped
(``weir: interrupted (Ctrl-C), stopping job ads``), then the command stops and exits 130.

``weir`` takes SIGINT itself for its whole run (``CtrlC.installed``). A command says what it is
doing with ``doing(what, graceful)``: ``what`` goes in the line, and ``graceful`` (a function
that asks the command to wind down, such as setting the event a job's run waits on) is called
instead of raising ``KeyboardInterrupt`` where stopping in order matters (a job's workers flush
and release their state). A second Ctrl-C raises ``KeyboardInterrupt`` anyway.

Workers and API member processes ignore SIGINT (the whole process group gets it from a
terminal): the command stops them in order. The line is written by a thread of its own, since
the signal may arrive while the main thread is writing to stderr itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from weir.base import logs

__all__ = ["CTRL_C", "CtrlC", "EXIT_INTERRUPTED"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


class CtrlC:
    """SIGINT for one ``weir`` process: what it is doing, whether Ctrl-C was pressed."""

    def __init__(self) -> None:
        self.pressed = threading.Event()
        self._doing: list[tuple[str, Callable[[], None] | None]] = []
        self._said: threading.Thread | None = None

    @contextmanager
    def installed(self, command: str) -> Iterator[None]:
        """Take SIGINT for ``weir <command>`` while inside (from the main thread; elsewhere,
        as when ``main`` runs in a test's thread, signals are left as they are)."""
        self.pressed.clear()
        self._said = None
        self._doing = [(f"weir {command}", None)]
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @contextmanager
    def doing(self, what: str, graceful: Callable[[], None] | None = None) -> Iterator[None]:
        """While inside, Ctrl-C names ``what`` and calls ``graceful`` (if given) instead of
        raising ``KeyboardInterrupt``."""
        self._doing.append((what, graceful))
        try:
            yield
        finally:
            self._doing.remove((what, graceful))

    def acknowledge(self) -> None:
        """Say, once, what is being stopped, and wait until the line is written, so that it
        comes before the exit."""
        self._say()
        if self._said is not None:
            self._said.join(2.0)

    def _say(self) -> None:
        if self._said is None:
            what = self._doing[-1][0] if self._doing else "weir"
            self._said = threading.Thread(
                target=logs.say, args=(f"interrupted (Ctrl-C), stopping {what}",), daemon=True
            )
            self._said.start()  # at once, from its own thread (see the module's docstring)

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        again = self.pressed.is_set()
        self.pressed.set()
        graceful = self._doing[-1][1] if self._doing else None
        self._say()
        if graceful is None or again:
            raise KeyboardInterrupt
        graceful()


CTRL_C = CtrlC()  # the process's: a signal handler is the process's by nature
