"""The job manager's control channel: the admin operations an API process running apart from
the job manager (``weir api``: savepoint, live backfill) and the lifecycle commands (``weir
stop``, ``weir cancel``) ask for.

- Loopback only: a TCP listener on 127.0.0.1, its port published in the status file.
- A shared key: 32 random bytes, new every run, in ``<state-dir>/<job>/control.key`` (mode
  0600). Each side proves it holds it (HMAC-SHA256 over the other side's random nonce, compared
  in constant time) before any request is read, so a stranger can neither ask nor answer.
- JSON frames (4-byte length + body), never pickles: ``{"op", "args"}`` in, ``{"ok": {...}}`` or
  ``{"error": {"type", "message"}}`` out; one request per connection. The arguments of each
  operation are a dataclass here (``SavepointArgs``, ``BackfillArgs``, ``StopArgs``,
  ``CancelArgs``), checked on arrival; ``handlers`` binds them to a ``Controlled`` job manager.
- Handshakes are served in one selector thread, each by an absolute deadline (``HANDSHAKE_S``
  from its accept, however the bytes dribble in) and with exact lengths; at most
  ``MAX_PENDING`` wait at once, and a new connection beyond that evicts the oldest. Only an
  authenticated request gets a thread of its own (at most ``MAX_CONNECTIONS``), so slow or silent
  clients, however many, never stand between a real ``weir stop`` and the job manager.

Not ``multiprocessing.connection``: on Python 3.11 its handshake is HMAC-MD5 compared with
``==``, it has no read timeouts and its ``recv`` unpickles.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

import orjson

from weir.engine.errors import ConfigError, ControlError, PathRefused, StateError, WeirError
from weir.engine.runtime.view import BackfillEntry, SavepointResult
from weir.engine.runtime.wire import from_plain

log = logging.getLogger(__name__)

KEY_FILE = "control.key"
HOST = "127.0.0.1"
HANDSHAKE_S = 5.0
MAX_FRAME = 1 << 20
MAX_CONNECTIONS = 8  # authenticated requests being answered at once
MAX_PENDING = 64  # handshakes in progress at once; a new one past it evicts the oldest
_HELLO = b"weir-control-1"
_NONCE = 32
_MAC = 32
_LEN = struct.Struct(">I")
_ERRORS: dict[str, type[WeirError]] = {
    "ConfigError": ConfigError,
    "ControlError": ControlError,
    "PathRefused": PathRefused,
    "StateError": StateError,
}

Handler = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class SavepointArgs:
    timeout_s: float


@dataclass(frozen=True, slots=True)
class BackfillArgs:
    req: dict[str, Any]  # the API's backfill request, checked by the job manager
    timeout_s: float


@dataclass(frozen=True, slots=True)
class StopArgs:
    savepoint: bool  # stop-with-savepoint (else a graceful stop, as SIGTERM)
    timeout_s: float  # for the savepoint; past it the job is not stopped


@dataclass(frozen=True, slots=True)
class CancelArgs:
    pass


class StopResult(TypedDict):
    job: str
    savepoint: SavepointResult | None
    state: str


class CancelResult(TypedDict):
    job: str
    state: str
    last_checkpoint: int | None  # what weir run --restore latest resumes from


class Controlled(Protocol):
    """What the control channel asks of a job manager."""

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult: ...

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry: ...

    def stop_job(self, savepoint: bool, timeout_s: float) -> StopResult: ...

    def cancel_job(self) -> CancelResult: ...


def handlers(target: Controlled) -> dict[str, Handler]:
    """Every operation by name, its arguments checked against their dataclass."""

    def savepoint(args: dict[str, Any]) -> SavepointResult:
        a = from_plain(SavepointArgs, args, "savepoint arguments")
        return target.trigger_savepoint(a.timeout_s)

    def backfill(args: dict[str, Any]) -> BackfillEntry:
        a = from_plain(BackfillArgs, args, "backfill arguments")
        return target.ingest_backfill(a.req, a.timeout_s)

    def stop(args: dict[str, Any]) -> StopResult:
        a = from_plain(StopArgs, args, "stop arguments")
        return target.stop_job(a.savepoint, a.timeout_s)

    def cancel(args: dict[str, Any]) -> CancelResult:
        from_plain(CancelArgs, args, "cancel arguments")
        return target.cancel_job()

    return {"savepoint": savepoint, "backfill": backfill, "stop": stop, "cancel": cancel}


def key_path(job_dir: Path) -> Path:
    return job_dir / KEY_FILE


def write_key(job_dir: Path) -> bytes:
    """A new key in ``job_dir/control.key``, readable by its owner only (created 0600, then
    renamed into place, so it is never readable by others even for a moment)."""
    key = secrets.token_bytes(32)
    target = key_path(job_dir)
    tmp = target.with_name(f".{KEY_FILE}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.hex().encode())
    os.replace(tmp, target)
    return key


def read_key(job_dir: Path) -> bytes:
    path = key_path(job_dir)
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the job manager's control key {path} ({exc}); run this command as "
            "the user running weir run, with the same --state-dir"
        ) from None


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    """``n`` bytes, all by ``deadline`` (absolute; None: as long as it takes)."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the control channel's handshake ran past its deadline")
            sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket, deadline: float | None, exact: int | None = None) -> bytes:
    """One frame; ``exact``: the only length it may have."""
    (n,) = _LEN.unpack(_recv_exact(sock, 4, deadline))
    if exact is not None and n != exact:
        raise ConnectionError(f"a handshake frame of {n} bytes, not {exact}")
    if n > MAX_FRAME:
        raise ConnectionError(f"a frame of {n} bytes is over the {MAX_FRAME}-byte limit")
    return _recv_exact(sock, n, deadline)


def _mac(key: bytes, role: bytes, nonce: bytes) -> bytes:
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
        self._sel = selectors.DefaultSelector()
        self._pending: dict[socket.socket, _Handshake] = {}

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
        self._sel.register(self._sock, selectors.EVENT_READ, None)
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                for h in [h for h in self._pending.values() if h.deadline <= now]:
                    self._drop(h, f"no complete handshake within {HANDSHAKE_S} s")
                for key, _ in self._sel.select(0.1):
                    if key.data is None:
                        self._accept()
                        continue
                    try:
                        self._step(key.data)
                    except Exception:  # noqa: BLE001 - one client's bug never ends the channel
                        log.exception("control: handshake failed peer=%s", key.data.peer)
                        self._drop(key.data, None)
        finally:
            for h in list(self._pending.values()):
                self._drop(h, None)
            self._sel.close()
            self._sock.close()

    def _accept(self) -> None:
        try:
            conn, addr = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.warning("control: accept failed: %s", exc)
            return
        if len(self._pending) >= MAX_PENDING:
            oldest = min(self._pending.values(), key=lambda h: h.deadline)
            self._drop(oldest, "evicted: too many handshakes at once")
        conn.setblocking(False)
        nonce = secrets.token_bytes(_NONCE)
        h = _Handshake(conn, f"{addr[0]}:{addr[1]}", time.monotonic() + HANDSHAKE_S, nonce)
        if not self._send_small(h, _HELLO + h.nonce):
            return
        self._pending[conn] = h
        self._sel.register(conn, selectors.EVENT_READ, h)

    def _send_small(self, h: _Handshake, data: bytes) -> bool:
        """A handshake message, whole into an empty socket buffer (else the client is gone)."""
        frame = _LEN.pack(len(data)) + data
        try:
            sent = h.sock.send(frame)
        except OSError:
            sent = 0
        if sent != len(frame):
            self._drop(h, "could not send the handshake")
            return False
        return True

    def _step(self, h: _Handshake) -> None:
        """Read what the handshake's current frame still needs; act once it is complete."""
        have = len(h.buf)
        want = 4 if have < 4 else 4 + _LEN.unpack_from(h.buf)[0]
        try:
            chunk = h.sock.recv(want - have)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(h, f"connection error {exc}")
            return
        if not chunk:
            self._drop(h, "closed during the handshake")
            return
        h.buf += chunk
        if len(h.buf) < 4:
            return
        (n,) = _LEN.unpack_from(h.buf)
        if len(h.buf) == 4:
            if (not h.proved and n != _MAC + _NONCE) or n > MAX_FRAME:
                self._drop(h, f"a handshake frame of {n} bytes")
            return
        if len(h.buf) < 4 + n:
            return
        body, h.buf = bytes(h.buf[4:]), bytearray()
        if h.proved:
            self._pending.pop(h.sock)
            self._sel.unregister(h.sock)
            self._dispatch(h.sock, body)
        elif not hmac.compare_digest(body[:_MAC], _mac(self._key, b"client", h.nonce)):
            self._drop(h, "a connection without the job's key was refused")
        else:
            h.proved = True
            self._send_small(h, _mac(self._key, b"server", body[_MAC:]))

    def _drop(self, h: _Handshake, why: str | None) -> None:
        if why is not None:
            log.warning("control: dropped peer=%s reason=%s", h.peer, why)
        if self._pending.pop(h.sock, None) is not None:
            self._sel.unregister(h.sock)
        h.sock.close()

    def _dispatch(self, conn: socket.socket, body: bytes) -> None:
        """An authenticated request: answered on a thread of its own, if one is free."""
        if not self._slots.acquire(blocking=False):
            busy = {"type": "ControlError", "message": "the job manager is busy; try again"}
            conn.setblocking(True)
            conn.settimeout(HANDSHAKE_S)
            try:
                _send(conn, orjson.dumps({"error": busy}))
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
                _send(conn, answer)
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
            return {"error": {"type": "ConfigError", "message": f"unknown op {op!r}; {known}"}}
        args = request.get("args")
        try:
            return {"ok": handler(args if isinstance(args, dict) else {})}
        except WeirError as exc:
            return {"error": {"type": type(exc).__name__, "message": str(exc)}}
        except Exception as exc:  # noqa: BLE001 - answer, and keep the job manager running
            log.exception("control: op=%s failed", op)
            return {"error": {"type": "ConfigError", "message": f"{op} failed: {exc}"}}


def call(port: int, key: bytes, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Ask the job manager listening on ``port`` for ``op``; its errors are raised as the same
    ``WeirError`` subclass (``ConfigError`` for any other)."""
    where = f"{HOST}:{port}"
    try:
        deadline = time.monotonic() + HANDSHAKE_S  # for the whole handshake, not per read
        with socket.create_connection((HOST, port), timeout=HANDSHAKE_S) as sock:
            hello = _recv(sock, deadline, exact=len(_HELLO) + _NONCE)
            if not hello.startswith(_HELLO):
                raise ConfigError(f"{where} is not a weir job manager's control channel")
            ours = secrets.token_bytes(_NONCE)
            _send(sock, _mac(key, b"client", hello[len(_HELLO) :]) + ours)
            proof = _recv(sock, deadline, exact=_MAC)
            if not hmac.compare_digest(proof, _mac(key, b"server", ours)):
                raise ConfigError(f"{where} does not hold this job's control key; not asking it")
            _send(sock, orjson.dumps({"op": op, "args": args}))
            sock.settimeout(timeout_s + HANDSHAKE_S)
            answer = orjson.loads(_recv(sock, None))
    except ConnectionRefusedError:
        raise ConfigError(
            f"nothing listens at {where}, the job manager's control channel; is weir run "
            "still running?"
        ) from None
    except ConnectionError:
        raise ConfigError(
            f"the job manager at {where} closed the control channel (a wrong control.key, or "
            "it stopped); is weir run still running?"
        ) from None
    except TimeoutError:
        raise ConfigError(f"the job manager at {where} did not answer {op} in time") from None
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the job manager at {where} ({exc.strerror or exc}); is weir run "
            "still running?"
        ) from None
    if "error" in answer:
        err = answer["error"]
        raise _ERRORS.get(str(err.get("type")), ConfigError)(str(err.get("message")))
    result: dict[str, Any] = answer["ok"]
    return result


__all__ = [
    "BackfillArgs",
    "CancelArgs",
    "CancelResult",
    "ControlServer",
    "Controlled",
    "SavepointArgs",
    "StopArgs",
    "StopResult",
    "call",
    "handlers",
    "key_path",
    "read_key",
    "write_key",
]
