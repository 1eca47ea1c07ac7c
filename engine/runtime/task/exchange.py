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

from weir.base.errors import ConfigError, WorkerFailed
from weir.engine.runtime.netio import parse_address
from weir.engine.runtime.peerauth import AuthFailed, PeerAuth, prove
from weir.engine.runtime.task.acceptor import MAX_PENDING, Acceptor, Stopped, peer_uid
from weir.engine.runtime.task.framing import MAX_FRAME

log = logging.getLogger(__name__)

TRANSPORTS = ("unix", "tcp")
_LEN = struct.Struct(">I")
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


def _socket_parent() -> str:
    """The temporary directory, unless its path would push a socket's past sun_path's 108
    bytes."""
    found = tempfile.gettempdir()
    return found if len(found.encode()) <= 64 else "/tmp"


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
        self._acceptor: Acceptor | None = None
        self._auth = auth
        self._transport = transport
        self._host = host
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._dir: Path | None = None  # the unix transport's private directory
        self.address = ""

    # -- set-up --------------------------------------------------------------------------------

    @property
    def refused(self) -> int:
        """Connections dropped for failing the handshake."""
        return 0 if self._acceptor is None else self._acceptor.refused

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
                if family == socket.AF_UNIX and peer_uid(s) != os.getuid():
                    raise AuthFailed(f"{address} belongs to uid {peer_uid(s)}")
                prove(s, self._auth, self.index, j, deadline)
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
        """Accept every higher-numbered worker (``Acceptor``), then close the listener."""
        assert self._listener is not None
        awaited = frozenset(range(self.index + 1, self.parallelism))
        self._acceptor = Acceptor(self.index, awaited, self._auth, self._listener)
        try:
            for j, s in self._acceptor.run(should_stop, deadline).items():
                self._add(j, s)
        finally:
            self._listener.close()
            self._remove_dir()

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
