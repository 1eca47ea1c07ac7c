"""Socket pieces shared by the control channel and the exchange.

``parse_address``: an exchange or state server address (``unix:<path>``, ``tcp:<host>:<port>``).
``recv_exact``: blocking reads (the control client, the exchange's connecting side) of exact
lengths by one absolute deadline, so a peer that dribbles bytes is cut off as surely as a
silent one. ``PendingConnections``: the listening sides' handshakes in progress, served in one
selector, so a silent, slow or hostile connection holds only its own slot. ``Waker``: a wait on
several connections that another thread can end early.
"""

from __future__ import annotations

import os
import selectors
import socket
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import connection
from typing import Any, Generic, Protocol, TypeVar

from weir.base.errors import ConfigError


def parse_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """``unix:<path>`` or ``tcp:<host>:<port>`` as a socket family and address."""
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return socket.AF_UNIX, rest
    host, _, port = rest.rpartition(":")
    if kind == "tcp" and host and port.isdigit():
        return socket.AF_INET, (host, int(port))
    raise ConfigError(f"exchange address {address!r} is not unix:<path> or tcp:<host>:<port>")


def recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    """``n`` bytes, all by ``deadline`` (``time.monotonic()``; None: as long as it takes)."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {n}-byte answer by the deadline")
            sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        buf += chunk
    return bytes(buf)


class Pending(Protocol):
    """A connection accepted but not yet proved: its socket, its absolute deadline, and the
    bytes of the handshake's current step received so far."""

    sock: socket.socket
    deadline: float
    buf: bytearray


P = TypeVar("P", bound=Pending)


class PendingConnections(Generic[P]):
    """Handshakes in progress on one selector, which also watches the ``listener``: each has
    until its own deadline, and at most ``limit`` wait at once (a new one past it evicts the
    oldest, so a flood costs the flood its slots and never the real peers'). ``dropped`` says
    why one was dropped (a log line, a count); a drop without a reason is silent."""

    def __init__(
        self, listener: socket.socket, limit: int, dropped: Callable[[P, str], None]
    ) -> None:
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, None)
        self._limit = limit
        self._dropped = dropped
        self._pending: dict[socket.socket, P] = {}

    def ready(self, timeout: float) -> list[P | None]:
        """The connections with bytes to read; None for the listener (one to accept)."""
        return [key.data for key, _ in self._sel.select(timeout)]

    def add(self, p: P, evicting: str) -> None:
        """Wait for ``p``'s bytes; at the limit the oldest goes first, for reason ``evicting``."""
        if len(self._pending) >= self._limit:
            self.drop(min(self._pending.values(), key=lambda q: q.deadline), evicting)
        p.sock.setblocking(False)
        self._pending[p.sock] = p
        self._sel.register(p.sock, selectors.EVENT_READ, p)

    def expire(self, now: float, why: str) -> None:
        """Drop every connection whose deadline has passed by ``now``."""
        for p in [p for p in self._pending.values() if p.deadline <= now]:
            self.drop(p, why)

    def receive(self, p: P, want: int) -> bool:
        """Read what ``p`` has sent of its step's ``want`` bytes, never past them (a frame's
        first byte must not be taken). False: nothing came, or ``p`` was dropped."""
        try:
            chunk = p.sock.recv(want - len(p.buf))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self.drop(p, f"connection error {exc}")
            return False
        if not chunk:
            self.drop(p, "closed during the handshake")
            return False
        p.buf += chunk
        return True

    def drop(self, p: P, why: str | None) -> None:
        """Close ``p``, pending or not yet added."""
        if why is not None:
            self._dropped(p, why)
        if self._pending.pop(p.sock, None) is not None:
            self._sel.unregister(p.sock)
        p.sock.close()

    def release(self, p: P) -> socket.socket:
        """``p`` proved itself: off the selector, its socket open for its owner."""
        del self._pending[p.sock]
        self._sel.unregister(p.sock)
        return p.sock

    def close(self) -> None:
        """Close every connection still pending, silently, and the selector."""
        for p in list(self._pending.values()):
            self.drop(p, None)
        self._sel.close()


class Waker:
    """A wait on several connections (anything ``multiprocessing.connection.wait`` takes) that
    ends early when one has something to read, or when another thread calls ``wake``: a thread
    that follows pipes and sockets sleeps until there is work, not on a clock."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        # closed with the object, never before: no wait or wake can use a descriptor number
        # that has been closed and reused
        weakref.finalize(self, _close_all, self._r, self._w)

    def wake(self) -> None:
        """End the current ``wait``, or the next one at once (from any thread, any number of
        times)."""
        try:
            os.write(self._w, b"\0")
        except BlockingIOError:  # the pipe is full of wakes: one is pending already
            pass

    def wait(self, waitables: Sequence[Any], timeout: float) -> bool:
        """Up to ``timeout`` seconds, until one of ``waitables`` is readable (or closed) or a
        wake; True when it ended early. A connection closed meanwhile by another thread ends it
        too (the caller's next look finds why)."""
        try:
            ready = connection.wait([*waitables, self._r], timeout)
        except (OSError, ValueError):  # a connection closed under the wait (a kill, a restart)
            time.sleep(min(timeout, 0.02))
            return True
        if self._r in ready:
            try:
                while os.read(self._r, 512):
                    pass
            except BlockingIOError:
                pass
        return bool(ready)


def _close_all(*fds: int) -> None:
    for fd in fds:
        os.close(fd)
