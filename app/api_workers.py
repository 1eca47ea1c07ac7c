"""More API processes on one port: ``weir api --workers N`` and ``weir run --api-workers N``.

Each process listens on the same address with ``SO_REUSEPORT``, so the kernel spreads new
connections over them, and each is a whole ``weir api``: its own secondary readers, committed
views and directory (``api-<pid>``), the job manager's status read from its file. Reads then
scale with processes instead of sharing one event loop and one GIL. The process that was started
serves one of them (``weir run``'s is its in-process API) and supervises the others here: a
member that dies abnormally is started again after a pause; a member stops with its parent
(SIGTERM to the parent stops all; a parent killed outright leaves none behind).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from weir.api.settings import ApiSettings
from weir.engine.runtime.control.workers import start_deaf_to_ctrl_c

log = logging.getLogger(__name__)

RESTART_DELAY_S = 1.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What a member process needs to serve the job's API as ``weir api`` would (handed over
    a pipe by ``multiprocessing``, so a token never shows in the process list)."""

    job_file: str
    state_dir: Path
    checkpoint_dir: str | None
    port: int
    settings: ApiSettings
    log_level: str = "INFO"
    log_format: str = "text"


class ApiMembers:
    """``count`` member processes beside this one, kept running until ``stop``."""

    def __init__(
        self,
        spec: MemberSpec,
        count: int,
        target: Callable[[MemberSpec], None],
        restart_delay_s: float = RESTART_DELAY_S,
    ):
        self.spec = spec
        self.target = target  # the member's entry, by reference (spawn pickles its name)
        self.count = count
        self.restart_delay_s = restart_delay_s
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._members: list[BaseProcess] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None

    def __enter__(self) -> ApiMembers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._members if p.pid is not None]

    def _spawn(self) -> BaseProcess:
        proc = self._ctx.Process(
            target=self.target, args=(self.spec,), name="weir-api-member", daemon=True
        )
        start_deaf_to_ctrl_c(proc)  # Ctrl-C is the parent's: it stops its members in order
        log.info("api member started pid=%s port=%d", proc.pid, self.spec.port)
        return proc

    def start(self) -> None:
        if self.count < 1:
            return
        with self._lock:
            self._members = [self._spawn() for _ in range(self.count)]
        self._monitor = threading.Thread(target=self._watch, name="weir-api-members", daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                members = list(self._members)
            wait([p.sentinel for p in members], timeout=0.5)
            for proc in members:
                if proc.exitcode is not None and not self._stopping.is_set():
                    try:
                        self._ended(proc)
                    except Exception as exc:  # noqa: BLE001 - e.g. EAGAIN: the next pass retries
                        log.warning("api member pid=%s could not be replaced: %r", proc.pid, exc)

    def _ended(self, proc: BaseProcess) -> None:
        """A member that ended abnormally (a crash, a kill) is started again; one that exited
        cleanly was asked to stop (SIGTERM), and stays stopped."""
        if proc.exitcode == 0:
            log.warning("api member pid=%s stopped", proc.pid)
            with self._lock:
                self._members = [p for p in self._members if p is not proc]
            return
        log.warning(
            "api member pid=%s exited code=%s; starting another in %.1f s",
            proc.pid,
            proc.exitcode,
            self.restart_delay_s,
        )
        if self._stopping.wait(self.restart_delay_s):
            return
        with self._lock:
            self._members = [self._spawn() if p is proc else p for p in self._members]
            self.restarts += 1

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            members = list(self._members)
        for proc in members:
            if proc.exitcode is None:
                proc.terminate()  # SIGTERM: uvicorn's graceful shutdown
        for proc in members:
            proc.join(STOP_TIMEOUT_S)
            if proc.exitcode is None:
                log.warning("api member pid=%s did not stop in time; killing it", proc.pid)
                proc.kill()
                proc.join()
        if self._monitor is not None:
            self._monitor.join(STOP_TIMEOUT_S)
