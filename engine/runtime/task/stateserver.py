"""A cluster task's state server: its key groups' live state, read from a secondary of its own
RocksDB and served over TCP to the job manager's API (``control.statereader`` is the client).

On one machine the API opens every worker's RocksDB as a secondary itself. On a cluster the
files are on the executors' disks, so each task serves them: the same secondary reader the
local API uses (``state.secondary.SecondaryReader``), in a thread of the task's process, so a query
never waits on the worker's loop (nor the loop on a query) beyond the interpreter lock.

Every connection proves, before a request is read, that it holds this attempt's secret: the
exchange's handshake (``peerauth``), the client taking the job manager's index
(``peerauth.MANAGER``), served by the exchange's ``Acceptor`` in one selector thread: a
handshake has ``HANDSHAKE_S`` by one deadline, at most ``acceptor.MAX_PENDING`` wait at once
and a new one past that evicts the oldest. Only a proved connection takes one of the
``MAX_CONNECTIONS`` serving threads, so connections that never prove themselves cannot keep the
job manager out (they once took the slots at ``accept()``); one past the cap is closed.

Requests and answers are length-prefixed msgpack frames, data only:

    request  [op, *args]        scan(lo, hi, limit) | seek(hi, key) | get(key)
    answer   [True, result, caught_up_at] or [False, error type, message, caught_up_at]
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from weir.base.errors import WeirError
from weir.engine.runtime import peerauth
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.stateproto import MAX_REQUEST, recv_frame, send_frame
from weir.engine.runtime.task import acceptor
from weir.state.secondary import SecondaryReader

log = logging.getLogger(__name__)

HANDSHAKE_S = acceptor.HANDSHAKE_S
MAX_CONNECTIONS = 64  # proved connections served at once: the job manager's and weir api's pools


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
        self._acceptor = acceptor.Acceptor(
            index, frozenset({peerauth.MANAGER}), auth, self._sock, "state server"
        )
        self._thread: threading.Thread | None = None
        self._ops: dict[str, Callable[..., Any]] = {
            "scan": self._scan,
            "seek": self._seek,
            "get": self._reader.get,
            "ranges": self._ranges,
            "expire": self._reader.expire,
        }

    @property
    def refused(self) -> int:
        """Connections dropped for failing (or never finishing) the handshake."""
        return self._acceptor.refused

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._acceptor.serve,
            args=(self._stop.is_set, self._proved),
            name="weir-state-server",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)  # its selector turns every 50 ms
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

    def _proved(self, _index: int, conn: socket.socket) -> None:
        """A connection that proved it is the job manager: served on a thread of its own."""
        if not self._slots.acquire(blocking=False):
            log.warning(
                "state server: worker=%d busy (%d connections); dropped a proved one",
                self.index,
                MAX_CONNECTIONS,
            )
            conn.close()
            return
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._open_lock:
            self._open.add(conn)
        try:
            with conn:
                conn.setblocking(True)  # proved: it may keep the connection for its next reads
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
        except Exception as exc:  # noqa: BLE001 - answered, not a connection closed on the reader
            # e.g. an OSError reopening the secondary: the job manager's error names it
            log.warning("state server: worker=%d %s failed: %r", self.index, request[0], exc)
            reason = f"{request[0]}: {type(exc).__name__}: {exc}"
            return [False, "StateError", reason, self._reader.caught_up_at]
        return [True, result, self._reader.caught_up_at]

    def _scan(self, lo: bytes, hi: bytes, limit: int | None) -> list[tuple[bytes, bytes]]:
        return self._reader.scan(lo, hi, limit)

    def _ranges(self, ranges: list[Any]) -> list[list[tuple[bytes, bytes]]]:
        return self._reader.scan_ranges(_pairs(ranges))

    def _seek(self, hi: bytes, key: bytes) -> bytes | None:
        it = self._reader.iterator(hi)
        it.seek(key)
        return it.key() if it.valid() else None


MAX_RANGES = 16  # a point lookup asks for two (its fine and coarse cells), four with panes


def _pairs(ranges: Any) -> list[tuple[bytes, bytes]]:
    """``ranges`` as ``[(lo, hi), ...]`` of bytes, or ``ValueError`` (answered as an error)."""
    if not isinstance(ranges, list) or len(ranges) > MAX_RANGES:
        raise ValueError(f"ranges must be a list of at most {MAX_RANGES} [lo, hi] pairs")
    out = []
    for pair in ranges:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[0], bytes)
            and isinstance(pair[1], bytes)
        ):
            raise ValueError("each range must be a [lo, hi] pair of bytes")
        out.append((pair[0], pair[1]))
    return out


__all__ = ["StateServer", "recv_frame", "send_frame"]
