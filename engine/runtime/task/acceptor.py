"""The listening side of the exchange's set-up: handshakes served in one selector, so that a
silent, slow or hostile connection holds only its own slot and never the real peers'.

Each accepted connection has ``HANDSHAKE_S`` from its accept to prove itself (``peerauth``),
however slowly its bytes arrive; at most ``MAX_PENDING`` wait at once and a new one past that
evicts the oldest. Reads take exactly what the handshake's step needs, never a frame's byte. On
the ``unix`` transport a connection from another uid (``SO_PEERCRED``) is dropped at once. Every
dropped connection is counted and logged with the peer it came from (``DropLog``: the first of
a reason at once, then one line per reason per interval with a count), and the acceptor goes on
until every awaited worker has proved itself.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from weir.base.errors import WorkerFailed
from weir.engine.runtime import peerauth
from weir.engine.runtime.droplog import DropLog
from weir.engine.runtime.netio import PendingConnections
from weir.engine.runtime.peerauth import AuthFailed, PeerAuth

log = logging.getLogger(__name__)

HANDSHAKE_S = 5.0  # a connection that has not proved itself by then is dropped
MAX_PENDING = 64  # handshakes in progress at once; past it the oldest is dropped
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Stopped(Exception):
    """The job was stopped while this worker was still connecting."""


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket."""
    pid, uid, _ = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid, uid


def peer_uid(sock: socket.socket) -> int:
    return peer_credentials(sock)[1]


def describe(sock: socket.socket) -> str:
    """The peer of an accepted connection, for a log line."""
    if sock.family == socket.AF_UNIX:
        pid, uid = peer_credentials(sock)
        return f"unix:pid={pid},uid={uid}"
    host, port = sock.getpeername()[:2]
    return f"tcp:{host}:{port}"


@dataclass(eq=False)
class _Pending:
    """A connection accepted but not yet authenticated: what it sent so far, by its deadline."""

    sock: socket.socket
    peer: str
    deadline: float
    buf: bytearray = field(default_factory=bytearray)
    hello: bytes = b""
    answer: bytes = b""
    index: int = -1


class Acceptor:
    """Accepts, on ``listener``, the peers numbered in ``awaited`` (in the exchange: worker
    ``index``'s higher-numbered peers; on a cluster's driver: every task; on a cluster task's
    state server, for good, the job manager: ``serve``). ``what`` begins its log lines."""

    def __init__(
        self,
        index: int,
        awaited: frozenset[int],
        auth: PeerAuth,
        listener: socket.socket,
        what: str = "exchange",
    ) -> None:
        self.index = index
        self.awaited = awaited
        self.refused = 0  # connections dropped for failing the handshake
        self._auth = auth
        self._listener = listener
        self._pending = PendingConnections[_Pending](listener, MAX_PENDING, self._dropped)
        self._proved: dict[int, socket.socket] = {}
        self._on_proved: Callable[[int, socket.socket], None] | None = None
        self._drops = DropLog(log, f"{what}: worker=%d", (index,))

    def run(self, should_stop: Callable[[], bool], deadline: float) -> dict[int, socket.socket]:
        """Every awaited worker's proved connection, by index; ``Stopped`` when
        ``should_stop()``, ``WorkerFailed`` past ``deadline``."""
        self._listener.setblocking(False)
        awaited = set(self.awaited)
        try:
            while set(self._proved) != awaited:
                if should_stop():
                    raise Stopped
                if time.monotonic() > deadline:
                    missing = sorted(awaited - set(self._proved))
                    raise WorkerFailed(self.index, f"workers {missing} never connected")
                self._turn()
            return dict(self._proved)
        except BaseException:
            for s in self._proved.values():
                s.close()
            raise
        finally:
            self._pending.close()
            self._drops.flush(force=True)

    def serve(
        self, should_stop: Callable[[], bool], on_proved: Callable[[int, socket.socket], None]
    ) -> None:
        """Accept until ``should_stop()``: each connection that proves an awaited index, as
        often as one does, goes to ``on_proved`` (a cluster task's state server, whose one
        client, the job manager, opens a connection per request in flight). Unproved
        connections hold only this selector's bounded handshake slots, never a served one."""
        self._on_proved = on_proved
        self._listener.setblocking(False)
        try:
            while not should_stop():
                self._turn()
        finally:
            self._pending.close()
            self._drops.flush(force=True)

    def _turn(self) -> None:
        """Expire late handshakes, then serve what is ready within 50 ms."""
        now = time.monotonic()
        self._pending.expire(now, f"no handshake within {HANDSHAKE_S} s")
        self._drops.flush(now)
        for p in self._pending.ready(0.05):
            if p is None:
                self._accept()
            else:
                self._advance(p)

    def _accept(self) -> None:
        try:
            s, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # out of descriptors, or the listener closed while stopping
            self._drops.dropped("(not accepted)", f"accept failed: {exc.strerror}")
            return
        try:
            peer = describe(s)
            other_user = s.family == socket.AF_UNIX and peer_uid(s) != os.getuid()
        except OSError as exc:  # reset before it was accepted: getpeername has no peer to name
            s.close()
            self._drops.dropped("(gone)", f"gone before its handshake: {exc.strerror}")
            return
        p = _Pending(s, peer, time.monotonic() + HANDSHAKE_S)
        if other_user:
            self._pending.drop(p, "another user")
            return
        self._pending.add(p, "too many handshakes at once; the oldest goes")

    def _advance(self, p: _Pending) -> None:
        """Read what the handshake's next step needs (exact lengths: never a frame's byte)."""
        need = peerauth.HELLO_BYTES if not p.hello else peerauth.PROOF_BYTES
        if not self._pending.receive(p, need) or len(p.buf) < need:
            return
        try:
            if not p.hello:
                self._answer(p)
                return
            peerauth.check_proof(self._auth, p.hello, p.answer, bytes(p.buf))
        except (AuthFailed, OSError) as exc:
            self._pending.drop(p, str(exc))
            return
        if self._on_proved is not None:
            self._on_proved(p.index, self._pending.release(p))
            return
        if p.index in self._proved:  # two proved the same index: the second is not believed
            self._pending.drop(p, f"worker {p.index} is connected already")
            return
        self._proved[p.index] = self._pending.release(p)

    def _answer(self, p: _Pending) -> None:
        p.hello, p.buf = bytes(p.buf), bytearray()
        head = peerauth.read_hello(self._auth, p.hello)
        if head.index not in self.awaited or head.index in self._proved:
            raise AuthFailed(f"claims worker {head.index}, not one awaited here")
        p.index = head.index
        p.answer = peerauth.answer(self._auth, self.index, p.hello)
        p.sock.sendall(p.answer)  # 84 bytes into an empty socket buffer

    def _dropped(self, p: _Pending, why: str) -> None:
        self.refused += 1
        self._drops.dropped(p.peer, why)
