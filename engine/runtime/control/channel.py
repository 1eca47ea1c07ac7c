"""The control channel's wire and its server: length-prefixed frames, the HMAC-SHA256
handshake's pieces, and ``ControlServer``, which serves ``admin``'s operations to holders of the
job's key (``admin`` has the operations, the key file and the client, ``call``).

The server serves every handshake in one selector thread, each by one absolute deadline
(``HANDSHAKE_S`` from its accept, however slowly the bytes dribble in) and with exact lengths;
at most ``MAX_PENDING`` wait at once and a new connection beyond that evicts the oldest. Only an
authenticated request gets a thread of its own (at most ``MAX_CONNECTIONS``), so no number of
slow or silent clients stands between a real ``weir stop`` and the job manager.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from weir.base.errors import WeirError
from weir.engine.runtime.droplog import DropLog
from weir.engine.runtime.netio import PendingConnections, recv_exact

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
HANDSHAKE_S = 5.0  # from accept to a complete request; from connect to the server's proof
MAX_FRAME = 1 << 20
MAX_CONNECTIONS = 8  # authenticated requests being answered at once
MAX_PENDING = 64  # handshakes in progress at once; a new one past it evicts the oldest
HELLO = b"weir-control-1"
NONCE_BYTES = 32
MAC_BYTES = 32
LEN = struct.Struct(">I")

Handler = Callable[[dict[str, Any]], Any]


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack(">I", len(data)) + data)


def recv_frame(sock: socket.socket, deadline: float | None, exact: int | None = None) -> bytes:
    """One frame; ``exact``: the only length it may have."""
    (n,) = LEN.unpack(recv_exact(sock, 4, deadline))
    if exact is not None and n != exact:
        raise ConnectionError(f"a handshake frame of {n} bytes, not {exact}")
    if n > MAX_FRAME:
        raise ConnectionError(f"a frame of {n} bytes is over the {MAX_FRAME}-byte limit")
    return recv_exact(sock, n, deadline)


def mac(key: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(key, role + nonce, hashlib.sha256).digest()


@dataclass(eq=False)
class _Handshake:
    """A connection not yet authenticated, or whose request is still arriving."""

    sock: socket.socket
    peer: str
    deadline: float
    nonce: bytes
    proved: bool = False  # the client's MAC checked; now its request
    buf: bytearray = field(default_factory=bytearray)


class ControlServer:
    """Serves ``handlers`` by name on 127.0.0.1 (any free port) to holders of ``key``."""

    def __init__(self, key: bytes, handlers: dict[str, Handler]) -> None:
        self._key = key
        self._handlers = handlers
        self._sock = socket.create_server((HOST, 0))
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._busy = 0  # requests being answered, guarded by ``_idle``
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pending = PendingConnections[_Handshake](self._sock, MAX_PENDING, self._dropped)
        self._drops = DropLog(log, "control:")  # one line per reason per interval, counted

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="weir-control", daemon=True)
        self._thread.start()

    def stop(self, drain_s: float = 5.0) -> None:
        """Stop accepting, and wait up to ``drain_s`` for the answers being sent (a stop or a
        cancel is answered after its work is done: its client hears it before weir run exits).
        Not to be called from a handler: it would wait for itself."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, drain_s)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                self._pending.expire(now, f"no complete handshake within {HANDSHAKE_S} s")
                self._drops.flush(now)
                for h in self._pending.ready(0.1):
                    if h is None:
                        self._accept()
                        continue
                    try:
                        self._step(h)
                    except Exception:  # noqa: BLE001 - one client's bug never ends the channel
                        log.exception("control: handshake failed peer=%s", h.peer)
                        self._pending.drop(h, None)
        finally:
            self._pending.close()
            self._sock.close()
            self._drops.flush(force=True)

    def _accept(self) -> None:
        try:
            conn, addr = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.warning("control: accept failed: %s", exc)
            return
        nonce = secrets.token_bytes(NONCE_BYTES)
        h = _Handshake(conn, f"{addr[0]}:{addr[1]}", time.monotonic() + HANDSHAKE_S, nonce)
        # added (non-blocking) before the hello: a client that never reads cannot stall the loop
        self._pending.add(h, "evicted: too many handshakes at once")
        self._send_small(h, HELLO + h.nonce)

    def _send_small(self, h: _Handshake, data: bytes) -> None:
        """A handshake message, whole into an empty socket buffer (else the client is gone)."""
        frame = LEN.pack(len(data)) + data
        try:
            sent = h.sock.send(frame)
        except OSError:
            sent = 0
        if sent != len(frame):
            self._pending.drop(h, "could not send the handshake")

    def _step(self, h: _Handshake) -> None:
        """Read what the handshake's current frame still needs; act once it is complete."""
        want = 4 if len(h.buf) < 4 else 4 + LEN.unpack_from(h.buf)[0]
        if not self._pending.receive(h, want) or len(h.buf) < 4:
            return
        (n,) = LEN.unpack_from(h.buf)
        if len(h.buf) == 4:
            if (not h.proved and n != MAC_BYTES + NONCE_BYTES) or n > MAX_FRAME:
                self._pending.drop(h, f"a handshake frame of {n} bytes")
            return
        if len(h.buf) < 4 + n:
            return
        body, h.buf = bytes(h.buf[4:]), bytearray()
        if h.proved:
            self._dispatch(self._pending.release(h), body)
        elif not hmac.compare_digest(body[:MAC_BYTES], mac(self._key, b"client", h.nonce)):
            self._pending.drop(h, "a connection without the job's key was refused")
        else:
            h.proved = True
            self._send_small(h, mac(self._key, b"server", body[MAC_BYTES:]))

    def _dropped(self, h: _Handshake, why: str) -> None:
        self._drops.dropped(h.peer, why)

    def _dispatch(self, conn: socket.socket, body: bytes) -> None:
        """An authenticated request: answered on a thread of its own, if one is free."""
        if not self._slots.acquire(blocking=False):
            busy = {"type": "ControlError", "message": "the job manager is busy; try again"}
            conn.setblocking(True)
            conn.settimeout(HANDSHAKE_S)
            try:
                send_frame(conn, orjson.dumps({"error": busy}))
            except OSError:
                pass
            conn.close()
            return
        with self._idle:
            self._busy += 1
        threading.Thread(target=self._serve, args=(conn, body), daemon=True).start()

    def _serve(self, conn: socket.socket, body: bytes) -> None:
        try:
            with conn:
                conn.setblocking(True)  # the operation may take long; the client waits for it
                request = orjson.loads(body)
                answer = orjson.dumps(self._answer(request))
                conn.settimeout(HANDSHAKE_S)
                send_frame(conn, answer)
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("control: connection dropped: %s", exc)
        finally:
            self._slots.release()
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def _answer(self, request: Any) -> dict[str, Any]:
        op = request.get("op") if isinstance(request, dict) else None
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            known = ", ".join(sorted(self._handlers))
            return {"error": {"type": "ControlError", "message": f"unknown op {op!r}; {known}"}}
        args = request.get("args")
        try:
            return {"ok": handler(args if isinstance(args, dict) else {})}
        except WeirError as exc:
            return {"error": {"type": type(exc).__name__, "message": str(exc)}}
        except Exception as exc:  # noqa: BLE001 - answer, and keep the job manager running
            log.exception("control: op=%s failed", op)
            return {"error": {"type": "ControlError", "message": f"{op} failed: {exc}"}}
