"""The keyed exchange between workers: authenticated, non-blocking, length-prefixed frames.

Every pair of workers shares one connection. Each worker listens at an address it chooses
(``listen``): a Unix socket in a fresh ``0700`` directory of its own (``unix``: only this user
can reach it, and the peer's uid is checked with ``SO_PEERCRED`` too), or a TCP port on
``127.0.0.1`` (``tcp``: what workers on other hosts will need). The job manager collects every
worker's address and tells all of them (``connect``); no name exists before its owner made it,
so there is nothing for another account to squat. Every connection proves it holds the run's
secret (``peerauth``) before a frame is read; one that does not is logged and dropped, and the
listener goes on accepting until every real peer has connected, then closes.

All sockets are non-blocking and served by one selector in the worker's own loop. A worker
therefore always drains its inputs, even while its outputs are full: nothing cycles into a
deadlock, and a full output only pauses the worker's *source* (backpressure), which keeps memory
bounded. A frame longer than ``framing.MAX_FRAME`` fails the worker before it is buffered.
"""

from __future__ import annotations

import logging
import os
import selectors
import shutil
import socket
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from weir.engine.errors import ConfigError, WorkerFailed
from weir.engine.runtime.task import peerauth
from weir.engine.runtime.task.framing import MAX_FRAME
from weir.engine.runtime.task.peerauth import AuthFailed, PeerAuth

log = logging.getLogger(__name__)

TRANSPORTS = ("unix", "tcp")
HANDSHAKE_S = 5.0  # a connection that has not proved itself by then is dropped
MAX_PENDING = 64  # handshakes in progress at once; past it the oldest is dropped
_LEN = struct.Struct(">I")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SOCKET_BUFFER = 4 * 1024 * 1024
_READ_CHUNK = 1024 * 1024


@dataclass(eq=False)
class Peer:
    index: int
    sock: socket.socket
    out: deque[memoryview] = field(default_factory=deque)
    out_bytes: int = 0
    inbuf: bytearray = field(default_factory=bytearray)
    closed: bool = False
    sent_frames: int = 0
    received_frames: int = 0


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


class Stopped(Exception):
    """The job was stopped while this worker was still connecting."""


def parse_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """``unix:<path>`` or ``tcp:<host>:<port>`` as a socket family and address."""
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return socket.AF_UNIX, rest
    host, _, port = rest.rpartition(":")
    if kind == "tcp" and host and port.isdigit():
        return socket.AF_INET, (host, int(port))
    raise ConfigError(f"exchange address {address!r} is not unix:<path> or tcp:<host>:<port>")


def _describe(sock: socket.socket, family: int) -> str:
    """The peer of an accepted connection, for a log line."""
    if family == socket.AF_UNIX:
        pid, uid, _ = _CRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
        )
        return f"unix:pid={pid},uid={uid}"
    host, port = sock.getpeername()[:2]
    return f"tcp:{host}:{port}"


def _socket_parent() -> str:
    """The temporary directory, unless its path would push a socket's past sun_path's 108
    bytes."""
    found = tempfile.gettempdir()
    return found if len(found.encode()) <= 64 else "/tmp"


def _peer_uid(sock: socket.socket) -> int:
    return int(_CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1])


class Exchange:
    def __init__(
        self,
        index: int,
        parallelism: int,
        auth: PeerAuth,
        transport: str = "unix",
        host: str = "127.0.0.1",
    ) -> None:
        if transport not in TRANSPORTS:
            raise ConfigError(f"exchange transport {transport!r}; use one of {TRANSPORTS}")
        self.index = index
        self.parallelism = parallelism
        self.peers: dict[int, Peer] = {}
        self.refused = 0  # connections dropped for failing the handshake
        self._auth = auth
        self._transport = transport
        self._host = host
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._dir: Path | None = None  # the unix transport's private directory
        self.address = ""

    # -- set-up --------------------------------------------------------------------------------

    def listen(self) -> str:
        """Listen at a new address of this worker's own; returns it, for the job manager."""
        if self._transport == "unix":
            # mkdtemp makes it 0700: no other account can reach (or pre-create) the socket
            self._dir = Path(tempfile.mkdtemp(prefix="weir-x-", dir=_socket_parent()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(self._dir / f"w{self.index}"))
            self.address = f"unix:{self._dir / f'w{self.index}'}"
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((self._host, 0))
            self.address = f"tcp:{self._host}:{s.getsockname()[1]}"
        s.listen(MAX_PENDING)
        self._listener = s
        return self.address

    def connect(
        self, addresses: list[str], should_stop: Callable[[], bool], timeout_s: float = 30.0
    ) -> None:
        """Connect to every lower-numbered worker at ``addresses[j]``, accept every higher one;
        give up (``Stopped``) as soon as ``should_stop()`` says the job is being stopped."""
        if self._listener is None:
            raise RuntimeError("listen() before connect()")
        deadline = time.monotonic() + timeout_s
        for j in range(self.index):
            self._add(j, self._dial(j, addresses[j], should_stop, deadline))
        self._accept_all(should_stop, deadline)

    def _dial(
        self, j: int, address: str, should_stop: Callable[[], bool], deadline: float
    ) -> socket.socket:
        family, where = parse_address(address)
        while True:
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                s.connect(where)
                if family == socket.AF_UNIX and _peer_uid(s) != os.getuid():
                    raise AuthFailed(f"{address} belongs to uid {_peer_uid(s)}")
                hello = peerauth.hello(self._auth, self.index)
                s.sendall(hello)
                raw = _recv_exactly(s, peerauth.ANSWER_BYTES, deadline)
                s.sendall(peerauth.check_answer(self._auth, hello, raw, j))
                return s
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if should_stop():
                    raise Stopped from None
                if time.monotonic() > deadline:
                    raise WorkerFailed(self.index, f"could not reach worker {j}") from None
                time.sleep(0.01)
            except (AuthFailed, OSError, ConnectionError) as exc:
                s.close()
                raise WorkerFailed(self.index, f"worker {j} at {address}: {exc}") from None

    def _accept_all(self, should_stop: Callable[[], bool], deadline: float) -> None:
        """Serve handshakes in one selector until every higher-numbered worker has proved
        itself: a silent or slow stranger holds only its own slot, never the others."""
        assert self._listener is not None
        listener = self._listener
        listener.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ, None)
        pending: dict[socket.socket, _Pending] = {}
        try:
            while len(self.peers) < self.parallelism - 1:
                if should_stop():
                    raise Stopped
                now = time.monotonic()
                if now > deadline:
                    missing = sorted(set(range(self.parallelism)) - set(self.peers) - {self.index})
                    raise WorkerFailed(self.index, f"workers {missing} never connected")
                for p in [p for p in pending.values() if p.deadline <= now]:
                    self._refuse(sel, pending, p, f"no handshake within {HANDSHAKE_S} s")
                for key, _ in sel.select(0.05):
                    if key.data is None:
                        self._accept_one(sel, pending)
                    else:
                        self._advance(sel, pending, key.data)
        finally:
            for p in pending.values():
                p.sock.close()
            sel.close()
            listener.close()
            self._remove_dir()

    def _accept_one(
        self, sel: selectors.BaseSelector, pending: dict[socket.socket, _Pending]
    ) -> None:
        assert self._listener is not None
        try:
            s, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        family = self._listener.family
        p = _Pending(s, _describe(s, family), time.monotonic() + HANDSHAKE_S)
        if family == socket.AF_UNIX and _peer_uid(s) != os.getuid():
            self.refused += 1
            log.warning("exchange: worker=%d refused peer=%s: another user", self.index, p.peer)
            s.close()
            return
        if len(pending) >= MAX_PENDING:
            oldest = min(pending.values(), key=lambda q: q.deadline)
            self._refuse(sel, pending, oldest, "too many handshakes at once; the oldest goes")
        s.setblocking(False)
        pending[s] = p
        sel.register(s, selectors.EVENT_READ, p)

    def _advance(
        self, sel: selectors.BaseSelector, pending: dict[socket.socket, _Pending], p: _Pending
    ) -> None:
        """Read what the handshake's next step needs (exact lengths: never a frame's byte)."""
        need = peerauth.HELLO_BYTES if not p.hello else peerauth.PROOF_BYTES
        try:
            chunk = p.sock.recv(need - len(p.buf))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._refuse(sel, pending, p, f"connection error {exc}")
            return
        if not chunk:
            self._refuse(sel, pending, p, "closed during the handshake")
            return
        p.buf += chunk
        if len(p.buf) < need:
            return
        try:
            if not p.hello:
                p.hello, p.buf = bytes(p.buf), bytearray()
                head = peerauth.read_hello(self._auth, p.hello)
                if not self.index < head.index < self.parallelism or head.index in self.peers:
                    raise AuthFailed(f"claims worker {head.index}, not one this worker awaits")
                p.index = head.index
                p.answer = peerauth.answer(self._auth, self.index, p.hello)
                p.sock.sendall(p.answer)  # 84 bytes into an empty socket buffer
                return
            peerauth.check_proof(self._auth, p.hello, p.answer, bytes(p.buf))
        except (AuthFailed, OSError) as exc:
            self._refuse(sel, pending, p, str(exc))
            return
        sel.unregister(p.sock)
        del pending[p.sock]
        if p.index in self.peers:  # two proved the same index: the second is not believed
            self._refuse(sel, pending, p, f"worker {p.index} is connected already")
            return
        self._add(p.index, p.sock)

    def _refuse(
        self,
        sel: selectors.BaseSelector,
        pending: dict[socket.socket, _Pending],
        p: _Pending,
        why: str,
    ) -> None:
        self.refused += 1
        log.warning("exchange: worker=%d dropped peer=%s reason=%s", self.index, p.peer, why)
        if pending.pop(p.sock, None) is not None:
            sel.unregister(p.sock)
        p.sock.close()

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _add(self, j: int, s: socket.socket) -> None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        if s.family == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        peer = Peer(j, s)
        self.peers[j] = peer
        self._sel.register(s, selectors.EVENT_READ, peer)

    # -- traffic -------------------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        return sum(p.out_bytes for p in self.peers.values())

    def send(self, j: int, payload: bytes) -> None:
        """Queue a frame for worker ``j`` and write as much as the socket takes now."""
        peer = self.peers[j]
        frame = memoryview(_LEN.pack(len(payload)) + payload)
        peer.out.append(frame)
        peer.out_bytes += len(frame)
        peer.sent_frames += 1
        self._write(peer)

    def _write(self, peer: Peer) -> None:
        while peer.out:
            head = peer.out[0]
            try:
                n = peer.sock.send(head)
            except BlockingIOError:
                break
            except (BrokenPipeError, ConnectionResetError):
                peer.closed = True
                peer.out.clear()
                peer.out_bytes = 0
                break
            peer.out_bytes -= n
            if n == len(head):
                peer.out.popleft()
            else:
                peer.out[0] = head[n:]
                break
        if not peer.closed:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if peer.out else 0)
            self._sel.modify(peer.sock, events, peer)

    def poll(self, timeout: float) -> list[tuple[int, bytes]]:
        """Move bytes both ways; return the complete frames received, in arrival order."""
        frames: list[tuple[int, bytes]] = []
        for key, mask in self._sel.select(timeout):
            peer: Peer = key.data
            if mask & selectors.EVENT_WRITE:
                self._write(peer)
            if mask & selectors.EVENT_READ:
                self._read(peer, frames)
        return frames

    def _read(self, peer: Peer, frames: list[tuple[int, bytes]]) -> None:
        while True:
            try:
                chunk = peer.sock.recv(_READ_CHUNK)
            except BlockingIOError:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                peer.closed = True
                self._sel.unregister(peer.sock)
                break
            peer.inbuf += chunk
            if len(chunk) < _READ_CHUNK:
                break
        buf = peer.inbuf
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if n > MAX_FRAME:  # a protocol violation by a proved peer: never buffer it
                raise WorkerFailed(
                    self.index,
                    f"worker {peer.index} sent a frame of {n} bytes, over the exchange's "
                    f"{MAX_FRAME}-byte limit",
                )
            if len(buf) - pos - 4 < n:
                break
            frames.append((peer.index, bytes(buf[pos + 4 : pos + 4 + n])))
            peer.received_frames += 1
            pos += 4 + n
        if pos:
            del buf[:pos]

    def closed_peers(self) -> list[int]:
        return [j for j, p in self.peers.items() if p.closed]

    def close(self) -> None:
        for peer in self.peers.values():
            try:
                self._sel.unregister(peer.sock)
            except (KeyError, ValueError):
                pass
            peer.sock.close()
        self._sel.close()
        if self._listener is not None:
            self._listener.close()
        self._remove_dir()


def _recv_exactly(s: socket.socket, n: int, deadline: float) -> bytes:
    """``n`` bytes by ``deadline`` (absolute: a peer dribbling bytes is cut off all the same)."""
    data = bytearray()
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {n}-byte handshake answer in time")
        s.settimeout(left)
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed during the handshake")
        data += chunk
    return bytes(data)
