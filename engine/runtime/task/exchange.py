"""The keyed exchange between workers: non-blocking, length-prefixed frames over Unix sockets.

Every pair of workers shares one connection (abstract-namespace Unix sockets, so no files). All
sockets are non-blocking and served by one selector in the worker's own loop. A worker therefore
always drains its inputs, even while its outputs are full: nothing cycles into a deadlock, and a
full output only pauses the worker's *source* (backpressure), which keeps memory bounded.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from weir.engine.errors import WorkerFailed

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
    sent_frames: int = 0
    received_frames: int = 0


class Stopped(Exception):
    """The job was stopped while this worker was still connecting."""


def _address(namespace: str, index: int) -> str:
    return f"\0weir-{namespace}-{index}"


class Exchange:
    def __init__(self, namespace: str, index: int, parallelism: int) -> None:
        self.namespace = namespace
        self.index = index
        self.parallelism = parallelism
        self.peers: dict[int, Peer] = {}
        self._sel = selectors.DefaultSelector()
        self._listener: socket.socket | None = None

    # -- set-up --------------------------------------------------------------------------------

    def listen(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(_address(self.namespace, self.index))
        s.listen(self.parallelism)
        self._listener = s

    def connect(self, should_stop: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Connect to every lower-numbered worker, accept every higher-numbered one; give up
        (``Stopped``) as soon as ``should_stop()`` says the job is being stopped."""
        if self._listener is None:
            self.listen()
        assert self._listener is not None
        deadline = time.monotonic() + timeout_s
        for j in range(self.index):
            while True:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(_address(self.namespace, j))
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    s.close()
                    if should_stop():
                        raise Stopped from None
                    if time.monotonic() > deadline:
                        raise WorkerFailed(self.index, f"could not reach worker {j}") from None
                    time.sleep(0.01)
            s.sendall(_LEN.pack(self.index))
            self._add(j, s)
        self._listener.settimeout(0.1)
        while len(self.peers) < self.parallelism - 1:
            try:
                s, _ = self._listener.accept()
            except TimeoutError:
                if should_stop():
                    raise Stopped from None
                if time.monotonic() > deadline:
                    missing = sorted(set(range(self.parallelism)) - set(self.peers) - {self.index})
                    raise WorkerFailed(self.index, f"workers {missing} never connected") from None
                continue
            s.settimeout(5.0)
            (j,) = _LEN.unpack(_recv_exactly(s, 4))
            self._add(j, s)
        self._listener.close()

    def _add(self, j: int, s: socket.socket) -> None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
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


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed during handshake")
        data += chunk
    return data
