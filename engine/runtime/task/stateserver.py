"""A cluster task's state server: its key groups' live state, read from a secondary of its own
RocksDB and served over TCP to the job manager's API (``control.statereader`` is the client).

On one machine the API opens every worker's RocksDB as a secondary itself. On a cluster the
files are on the executors' disks, so each task serves them: the same secondary reader the
local API uses (``state.rocksdb.SecondaryReader``), in a thread of the task's process, so a query
never waits on the worker's loop (nor the loop on a query) beyond the interpreter lock.

Every connection proves, before a request is read, that it holds this attempt's secret: the
exchange's handshake (``peerauth``), the client taking the job manager's index
(``peerauth.MANAGER``). A handshake has ``HANDSHAKE_S`` by one deadline; at most
``MAX_CONNECTIONS`` connections are served at once and one past that is closed at once.

Requests and answers are length-prefixed msgpack frames, data only:

    request  [op, *args]        scan(lo, hi, limit) | seek(hi, key) | get(key)
    answer   [True, result, caught_up_at] or [False, error type, message, caught_up_at]
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from weir.base.errors import WeirError
from weir.engine.runtime import peerauth
from weir.engine.runtime.netio import recv_exact
from weir.engine.runtime.peerauth import AuthFailed, PeerAuth
from weir.engine.runtime.stateproto import MAX_REQUEST, recv_frame, send_frame
from weir.state.rocksdb import SecondaryReader

log = logging.getLogger(__name__)

HANDSHAKE_S = 5.0
MAX_CONNECTIONS = 16


class StateServer:
    """Serves worker ``index``'s RocksDB at ``db`` (a secondary in ``secondary``) on ``host``."""

    def __init__(self, index: int, db: Path, secondary: Path, auth: PeerAuth, host: str) -> None:
        self.index = index
        self._auth = auth
        self._reader = SecondaryReader(db, secondary)
        self._sock = socket.create_server((host, 0))
        self.address = f"tcp:{host}:{self._sock.getsockname()[1]}"
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()  # connections being served, ended by close()
        self._open_lock = threading.Lock()
        self.refused = 0  # connections that failed the handshake
        self._ops: dict[str, Callable[..., Any]] = {
            "scan": self._scan,
            "seek": self._seek,
            "get": self._reader.get,
        }

    def start(self) -> None:
        threading.Thread(target=self._accept, name="weir-state-server", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        with self._open_lock:
            serving = list(self._open)
        for conn in serving:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # its thread's read ends; its client reconnects
            except OSError:
                pass
        self._reader.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = self._sock.accept()
            except OSError:
                return  # closed
            if not self._slots.acquire(blocking=False):
                log.warning("state server: worker=%d busy; dropped peer=%s", self.index, addr)
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn, addr), daemon=True).start()

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        with self._open_lock:
            self._open.add(conn)
        try:
            with conn:
                try:
                    self._handshake(conn)
                except AuthFailed as exc:
                    # counted before the connection closes: whoever sees it closed sees the count
                    self.refused += 1
                    log.warning(
                        "state server: worker=%d refused peer=%s: %s", self.index, addr, exc
                    )
                    return
                conn.settimeout(None)  # proved: it may keep the connection for its next reads
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while not self._stop.is_set():
                    request = recv_frame(conn, MAX_REQUEST, None)
                    send_frame(conn, self._answer(request))
        except (OSError, ConnectionError, ValueError, msgpack.UnpackException):
            pass  # the client went away, or broke the protocol: its connection ends
        finally:
            with self._open_lock:
                self._open.discard(conn)
            self._slots.release()

    def _handshake(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + HANDSHAKE_S
        try:
            hello = recv_exact(conn, peerauth.HELLO_BYTES, deadline)
            head = peerauth.read_hello(self._auth, hello)
            if head.index != peerauth.MANAGER:
                raise AuthFailed(f"claims worker {head.index}; only the job manager reads state")
            answer = peerauth.answer(self._auth, self.index, hello)
            conn.sendall(answer)
            proof = recv_exact(conn, peerauth.PROOF_BYTES, deadline)
        except (TimeoutError, ConnectionError) as exc:
            raise AuthFailed(f"no complete handshake within {HANDSHAKE_S} s ({exc})") from None
        peerauth.check_proof(self._auth, hello, answer, proof)

    def _answer(self, request: Any) -> list[Any]:
        at = self._reader.caught_up_at
        if not (isinstance(request, list) and request and isinstance(request[0], str)):
            return [False, "StateError", "a request is [op, *args]", at]
        op = self._ops.get(request[0])
        if op is None:
            return [False, "StateError", f"unknown op {request[0]!r}; {sorted(self._ops)}", at]
        try:
            result = op(*request[1:])
        except WeirError as exc:
            return [False, type(exc).__name__, str(exc), self._reader.caught_up_at]
        except (TypeError, ValueError) as exc:
            return [False, "StateError", f"{request[0]}: {exc}", self._reader.caught_up_at]
        return [True, result, self._reader.caught_up_at]

    def _scan(self, lo: bytes, hi: bytes, limit: int | None) -> list[tuple[bytes, bytes]]:
        return self._reader.scan(lo, hi, limit)

    def _seek(self, hi: bytes, key: bytes) -> bytes | None:
        it = self._reader.iterator(hi)
        it.seek(key)
        return it.key() if it.valid() else None


__all__ = ["StateServer", "recv_frame", "send_frame"]
