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
- Timeouts on every read, a thread per connection and a bound on connections: a client that
  connects and says nothing holds nothing for long.

Not ``multiprocessing.connection``: on Python 3.11 its handshake is HMAC-MD5 compared with
``==``, it has no read timeouts and its ``recv`` unpickles.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
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
MAX_CONNECTIONS = 8
_HELLO = b"weir-control-1"
_NONCE = 32
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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    if n > MAX_FRAME:
        raise ConnectionError(f"a frame of {n} bytes is over the {MAX_FRAME}-byte limit")
    return _recv_exact(sock, n)


def _mac(key: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(key, role + nonce, hashlib.sha256).digest()


class ControlServer:
    """Serves ``handlers`` by name on 127.0.0.1 (any free port) to holders of ``key``."""

    def __init__(self, key: bytes, handlers: dict[str, Handler]) -> None:
        self._key = key
        self._handlers = handlers
        self._sock = socket.create_server((HOST, 0))
        self._sock.settimeout(0.25)  # the accept loop looks at the stop flag this often
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._busy = 0  # connections being served, guarded by ``_idle``
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept, name="weir-control", daemon=True)
        self._thread.start()

    def stop(self, drain_s: float = 5.0) -> None:
        """Stop accepting, and wait up to ``drain_s`` for the answers being sent (a stop or a
        cancel is answered after its work is done: its client hears it before weir run exits).
        Not to be called from a handler: it would wait for itself."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        self._sock.close()
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, drain_s)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()  # too many at once: refuse rather than queue
                continue
            with self._idle:
                self._busy += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(HANDSHAKE_S)
                nonce = secrets.token_bytes(_NONCE)
                _send(conn, _HELLO + nonce)
                reply = _recv(conn)
                theirs = reply[32:]
                if not hmac.compare_digest(reply[:32], _mac(self._key, b"client", nonce)):
                    log.warning("control: a connection without the job's key was refused")
                    return
                if len(theirs) != _NONCE:
                    return
                _send(conn, _mac(self._key, b"server", theirs))
                request = orjson.loads(_recv(conn))
                conn.settimeout(None)  # the operation may take long; the client waits for it
                _send(conn, orjson.dumps(self._answer(request)))
        except (OSError, ConnectionError, orjson.JSONDecodeError, struct.error) as exc:
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
        with socket.create_connection((HOST, port), timeout=HANDSHAKE_S) as sock:
            hello = _recv(sock)
            if not hello.startswith(_HELLO):
                raise ConfigError(f"{where} is not a weir job manager's control channel")
            ours = secrets.token_bytes(_NONCE)
            _send(sock, _mac(key, b"client", hello[len(_HELLO) :]) + ours)
            proof = _recv(sock)
            if not hmac.compare_digest(proof, _mac(key, b"server", ours)):
                raise ConfigError(f"{where} does not hold this job's control key; not asking it")
            _send(sock, orjson.dumps({"op": op, "args": args}))
            sock.settimeout(timeout_s)
            answer = orjson.loads(_recv(sock))
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
