"""The job manager's reader of a cluster task's live state: the same interface as the local
secondary reader (``state.secondary.SecondaryReader``: ``get``, ``scan``, ``iterator``,
``caught_up_at``), answered by the task's state server (``task.stateserver``) over TCP.

Connections are authenticated with the attempt's secret and kept in a small pool, one per
request in flight. A restart makes the API open new readers (new tasks, new addresses, a new
secret); a connection that breaks is replaced once, then the read fails with ``StateError``
(503 in the API) naming the worker and where it was.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from weir.base.errors import StateError
from weir.engine.runtime import peerauth
from weir.engine.runtime.netio import parse_address
from weir.engine.runtime.peerauth import AuthFailed, PeerAuth, prove
from weir.engine.runtime.stateproto import MAX_ANSWER, recv_frame, send_frame

CONNECT_S = 5.0
CONNECT_TRIES = 3  # handshakes a connection may try, the server having closed the last
ANSWER_S = 30.0
POOL = 8  # idle connections kept per task

# where worker i serves its state now, and the secret that proves this job manager to it
Endpoint = Callable[[], tuple[str | None, PeerAuth | None]]


class RemoteSeeker:
    """``keylist.Seeker`` over a task: each seek is one round trip."""

    def __init__(self, reader: RemoteReader, hi: bytes) -> None:
        self._reader = reader
        self._hi = hi
        self._key: bytes | None = None

    def seek(self, key: bytes) -> None:
        self._key = self._reader.call("seek", self._hi, key)

    def valid(self) -> bool:
        return self._key is not None

    def key(self) -> bytes:
        if self._key is None:
            raise StateError("key() of an iterator that is not valid")
        return self._key


class RemoteReader:
    def __init__(self, index: int, endpoint: Endpoint) -> None:
        self.index = index
        self._endpoint = endpoint
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self.caught_up_at = 0.0
        self.reopened = 0  # the local reader's counters, for /metrics: not known remotely
        self.catch_up_failures = 0

    def get(self, key: bytes) -> bytes | None:
        found: bytes | None = self.call("get", key)
        return found

    def scan(self, lo: bytes, hi: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        return [(bytes(k), bytes(v)) for k, v in self.call("scan", lo, hi, limit)]

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
        """``scan`` of each range, in one request."""
        found = self.call("ranges", ranges)
        return [[(bytes(k), bytes(v)) for k, v in entries] for entries in found]

    def iterator(self, hi: bytes) -> RemoteSeeker:
        return RemoteSeeker(self, hi)

    def expire(self) -> None:
        """The task's reader catches up before its next answer (``SecondaryReader.expire``)."""
        self.call("expire")

    def call(self, op: str, *args: Any) -> Any:
        """One request, on a pooled connection; a broken one is replaced once."""
        for attempt in (0, 1):
            sock = self._take(fresh=attempt == 1)
            try:
                send_frame(sock, [op, *args])
                answer = recv_frame(sock, MAX_ANSWER, time.monotonic() + ANSWER_S)
            except (OSError, ConnectionError, ValueError) as exc:
                sock.close()
                if attempt == 1:
                    raise StateError(
                        f"worker {self.index}'s state server stopped answering ({exc}); "
                        "the job may be restarting: retry"
                    ) from None
                continue
            self._give_back(sock)
            return self._result(op, answer)
        raise AssertionError("unreachable")

    def _result(self, op: str, answer: Any) -> Any:
        if not isinstance(answer, list) or len(answer) not in (3, 4):
            raise StateError(f"worker {self.index} answered {op} with a malformed frame")
        self.caught_up_at = float(answer[-1] or 0.0)
        if answer[0] is True:
            return answer[1]
        raise StateError(f"worker {self.index}: {answer[2]}")

    def _take(self, fresh: bool) -> socket.socket:
        if not fresh:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
        return self._connect()

    def _give_back(self, sock: socket.socket) -> None:
        with self._lock:
            if len(self._idle) < POOL:
                self._idle.append(sock)
                return
        sock.close()

    def _connect(self) -> socket.socket:
        """A new connection, proved. A state server under a flood of silent connections drops
        the oldest handshake in progress for each new one past its cap (``acceptor``), so a
        handshake the server closed is tried again, on a new connection, while ``CONNECT_S``
        lasts (``CONNECT_TRIES`` in all); a refused proof is not."""
        address, auth = self._endpoint()
        if address is None or auth is None:
            raise StateError(f"worker {self.index} is not serving its state yet; it is starting")
        _, where = parse_address(address)
        deadline = time.monotonic() + CONNECT_S
        for attempt in range(CONNECT_TRIES):
            try:
                sock = socket.create_connection(where, timeout=CONNECT_S)  # type: ignore[arg-type]
            except OSError as exc:
                raise StateError(
                    f"worker {self.index} at {address} is unreachable: {exc}"
                ) from None
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                prove(sock, auth, peerauth.MANAGER, self.index, deadline)
            except AuthFailed as exc:
                sock.close()
                raise StateError(f"worker {self.index} at {address}: {exc}") from None
            except (OSError, ConnectionError) as exc:
                sock.close()
                if attempt + 1 == CONNECT_TRIES or time.monotonic() >= deadline:
                    raise StateError(f"worker {self.index} at {address}: {exc}") from None
                continue
            return sock
        raise AssertionError("unreachable")

    @staticmethod
    def memory() -> dict[str, int]:
        """Nothing here: the state and its memory are the task's, on its executor."""
        return {}

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()
