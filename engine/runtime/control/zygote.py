"""Local workers forked from a zygote: a copy of ``weir run`` made before it starts any thread,
which has imported what a worker runs and, for a SQL job, holds its plan (decision 0015).

A spawned worker is a fresh interpreter: it imports weir, numpy and the kernels (~0.4 CPU-s)
and plans the job again (a SQL file: another ~0.15-0.3 CPU-s) before it reads a record, at
every start and restart. A worker forked from the zygote starts in milliseconds and shares
those pages until it writes them. The stdlib's ``forkserver`` start method would import the
modules once too, but not share the supervisor's plan, and it listens on a Unix socket that
any process of the user could connect to and have it unpickle what it sends; the zygote is
reached only through a socket pair the supervisor made before forking it, so no other process
can talk to it.

What the zygote is told, per worker: two pipes (the pickled ``Process`` object to run, and
where to write the worker's pid and, once reaped, its exit code) and the descriptors the
pickle refers to (``multiprocessing`` connections), passed as ``SCM_RIGHTS``. The supervisor
follows each worker through a pidfd (no pid reuse can make it signal or wait for another
process), so a worker keeps being followed and killed exactly even if the zygote is gone.

Why a SQL job's plan may be shared but a Python job file still runs in each worker: planning
SQL runs no user code, while a job file's module-level code (a client, a connection) must not
be shared by processes, as it never was when every worker ran the file itself. Ctrl-C: the
zygote and its workers ignore SIGINT from their first instruction (a terminal's Ctrl-C reaches
the whole process group; the job manager stops the workers in order). The zygote ignores
SIGTERM and SIGHUP too: it shows weir run's command line, so `pkill -f "weir run"` signals it
with its workers, and it must outlive them to report how they exit.
"""

from __future__ import annotations

import ctypes
import gc
import io
import logging
import os
import pickle
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Callable
from multiprocessing import connection, process, reduction, util
from multiprocessing.context import set_spawning_popen
from multiprocessing.forkserver import read_signed, write_signed
from multiprocessing.popen_fork import Popen as ForkPopen
from typing import Any

log = logging.getLogger(__name__)

MAX_FDS = 16  # descriptors one worker's arguments may carry (a worker passes one pipe)
STATUS_WAIT_S = 5.0
_PR_SET_NAME = 15  # how long a reaped worker's exit code may take to arrive

_current: Zygote | None = None
_inherited: list[int] = []  # in a worker: the descriptors its pickle refers to, by index


def current() -> Zygote | None:
    """This process's zygote, if ``start`` made one and it still runs."""
    return _current if _current is not None and _current.alive() else None


def start(preload: Callable[[], None] | None = None) -> Zygote | None:
    """Fork this process's zygote, which runs ``preload`` and then imports a worker's modules.

    Returns None (workers are spawned, as before) where forking is not safe: another thread
    runs (it could hold a lock the copy would never see released), or the platform has no
    ``fork`` or pidfds (not Linux).
    """
    global _current
    threads = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if threads or not hasattr(os, "pidfd_open") or not hasattr(os, "fork"):
        why = f"threads {threads} run" if threads else "this platform has no pidfds"
        log.debug("workers are spawned, not forked from a zygote: %s", why)
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # what weir run made so far lives as long as it does: the collector leaves it alone here
    # and in the copies, whose pages stay shared (gc.freeze's recipe: freeze, fork, enable)
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # the zygote
        code = 1
        try:
            ours.close()
            code = _serve(theirs, preload)
        except BaseException:  # noqa: BLE001 - the zygote must never return into the caller
            log.exception("the zygote failed")
        finally:
            os._exit(code)
    theirs.close()
    _current = Zygote(pid, ours)
    return _current


def stop() -> None:
    """End this process's zygote, if it has one (its workers, already forked, go on)."""
    if _current is not None:
        _current.close()


class Zygote:
    """The supervisor's end of its zygote: ``launch`` a process object; ``close`` ends it."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self._channel = channel
        self._lock = threading.Lock()
        self._exit: int | None = None

    def alive(self) -> bool:
        if self._exit is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                done, status = self.pid, 0
            if done:
                self._exit = os.waitstatus_to_exitcode(status)
                log.warning(
                    "the workers' zygote (pid %d) exited with code %d; workers are spawned "
                    "from now on", self.pid, self._exit,
                )  # fmt: skip
        return self._exit is None

    def request(self, fds: list[int]) -> None:
        """Ask for a fork that reads its process object from ``fds[0]`` (see ``_serve``)."""
        with self._lock:
            reduction.sendfds(self._channel, fds)

    def close(self) -> None:
        """End the zygote (its workers, already forked, go on) and reap it."""
        global _current
        if _current is self:
            _current = None
        self._channel.close()
        if self._exit is None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self._exit = 0


class _DupFd:
    """A descriptor a pickled process object refers to, found by index in the worker."""

    def __init__(self, index: int) -> None:
        self.index = index

    def detach(self) -> int:
        return _inherited[self.index]


class ZygotePopen(ForkPopen):
    """``multiprocessing``'s handle of a worker forked by the zygote, followed by a pidfd."""

    method = "zygote"
    DupFd = _DupFd

    def __init__(self, process_obj: Any, zygote: Zygote) -> None:
        self._zygote = zygote
        self._fds: list[int] = []
        self._pidfd = -1
        self._status = -1
        super().__init__(process_obj)

    def duplicate_for_child(self, fd: int) -> int:
        self._fds.append(fd)
        return len(self._fds) - 1

    def _launch(self, process_obj: Any) -> None:
        buf = io.BytesIO()
        set_spawning_popen(self)  # type: ignore[arg-type]
        try:
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        if len(self._fds) > MAX_FDS:
            raise ValueError(f"a worker's arguments refer to {len(self._fds)} descriptors")
        data_r, data_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            self._zygote.request([data_r, status_w, *self._fds])
        finally:
            os.close(data_r)
            os.close(status_w)
        with open(data_w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self._status = status_r
        self.pid = read_signed(status_r)
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:  # it ended already: its exit code is on the way
            self._pidfd = os.open(os.devnull, os.O_RDONLY)  # always readable: a sentinel
        self.sentinel = self._pidfd
        # the stdlib forkserver's Popen closes its descriptors so too (util.close_fds)
        close = util.close_fds  # type: ignore[attr-defined]
        self.finalizer = util.Finalize(self, close, (self._pidfd, status_r))

    def poll(self, flag: int = os.WNOHANG) -> int | None:
        if self.returncode is None:
            timeout = 0 if flag == os.WNOHANG else None
            if not connection.wait([self._pidfd], timeout):
                return None
            if not connection.wait([self._status], STATUS_WAIT_S):
                return None  # the zygote has not reaped it yet: still counts as running
            try:
                self.returncode = read_signed(self._status)
            except (OSError, EOFError):
                self.returncode = 255  # the zygote is gone: its exit code is lost
        return self.returncode

    def _send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except (ProcessLookupError, OSError):
                pass  # it ended already (a devnull sentinel is no pidfd)


class ZygoteProcess(process.BaseProcess):
    """A ``multiprocessing`` process forked by this process's zygote (``current()``)."""

    _start_method = None

    @staticmethod
    def _Popen(process_obj: Any) -> ZygotePopen:  # noqa: N802 - multiprocessing's name
        zygote = current()
        if zygote is None:
            raise RuntimeError("no zygote runs to fork a worker from")
        return ZygotePopen(process_obj, zygote)


# -- the zygote's side ---------------------------------------------------------------------------


def _serve(channel: socket.socket, preload: Callable[[], None] | None) -> int:
    """Fork a worker per request until the supervisor closes its end (or exits)."""
    # it follows weir run, not signals: a Ctrl-C, a hang-up or a `pkill -f "weir run"` reaches
    # it too (it has weir run's command line), and it must outlive its workers to report how
    # they exit; it ends when weir run closes its end of the socket pair (or exits)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    name_process("weir-zygote")
    _close_inherited(keep=channel.fileno())
    if preload is not None:
        preload()
    import weir.engine.runtime.task.main  # noqa: F401 - what every worker runs
    from weir.engine.kernels import load

    load()
    gc.freeze()  # what the workers share: the collector's passes leave it (and its pages) alone
    gc.enable()  # forked while weir run's start-up had it paused (app.startup)
    sig_r, sig_w = os.pipe()
    os.set_blocking(sig_r, False)
    os.set_blocking(sig_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(sig_w)
    status_of: dict[int, int] = {}  # worker pid -> where its exit code goes
    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        selector.register(sig_r, selectors.EVENT_READ)
        while True:
            ready = [key.fileobj for key, _ in selector.select()]
            if sig_r in ready:
                os.read(sig_r, 65536)
                _reap(status_of)
            if channel in ready:
                try:
                    fds = reduction.recvfds(channel, MAX_FDS + 2)
                except EOFError:
                    return 0  # the supervisor is gone or done: its workers go on alone
                data_r, status_w, *passed = fds
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    channel.close()
                    _worker(data_r, passed, [sig_r, sig_w, status_w, *status_of.values()])
                write_signed(status_w, pid)
                status_of[pid] = status_w
                for fd in (data_r, *passed):
                    os.close(fd)


def _reap(status_of: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        status_w = status_of.pop(pid, None)
        if status_w is not None:
            try:
                write_signed(status_w, os.waitstatus_to_exitcode(status))
            except BrokenPipeError:
                pass  # the supervisor stopped following it
            os.close(status_w)


def _worker(data_r: int, passed: list[int], unused: list[int]) -> None:
    """In a forked worker: read the process object the supervisor sent and run it."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):  # as a spawned worker's
            signal.signal(sig, signal.SIG_DFL)
        name_process("weir-worker")
        for fd in unused:
            os.close(fd)
        _inherited[:] = passed
        parent_sentinel = os.dup(data_r)
        with os.fdopen(data_r, "rb", closefd=True) as from_parent:
            process.current_process()._inheriting = True  # type: ignore[attr-defined]
            try:
                proc = pickle.load(from_parent)
            finally:
                del process.current_process()._inheriting  # type: ignore[attr-defined]
        code = proc._bootstrap(parent_sentinel)
    except BaseException:  # noqa: BLE001 - say why, then end: never return into the zygote
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
    finally:
        os._exit(code)


def _close_inherited(keep: int) -> None:
    """Close every descriptor above stderr but ``keep``: a spawned worker inherited none
    (a pipe the supervisor was started with must not stay open in its workers)."""
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


def name_process(name: str) -> None:
    """Set the name ``ps``, ``top`` and ``/proc/<pid>/comm`` show (Linux; at most 15 bytes):
    a forked process would otherwise show as another ``weir run``."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # a name is a courtesy


__all__ = ["Zygote", "ZygotePopen", "ZygoteProcess", "current", "start", "stop"]
