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
- Handshakes are served in one selector thread (``channel.ControlServer``), each by one
  absolute deadline and with exact lengths; only an authenticated request gets a thread, so slow
  or silent clients, however many, never stand between a real ``weir stop`` and the job manager.
  The client's side (``call``) reads its handshake by one deadline and exact lengths too.

Not ``multiprocessing.connection``: on Python 3.11 its handshake is HMAC-MD5 compared with
``==``, it has no read timeouts and its ``recv`` unpickles.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict

import orjson

from weir.base.errors import ConfigError, ControlError, PathRefused, StateError, WeirError
from weir.engine.runtime.control.channel import (
    HANDSHAKE_S,
    HELLO,
    HOST,
    MAC_BYTES,
    NONCE_BYTES,
    ControlServer,
    Handler,
    mac,
    recv_frame,
    send_frame,
)
from weir.engine.runtime.view import BackfillEntry, SavepointResult
from weir.engine.runtime.wire import from_plain

log = logging.getLogger(__name__)

KEY_FILE = "control.key"
_ERRORS: dict[str, type[WeirError]] = {
    "ConfigError": ConfigError,
    "ControlError": ControlError,
    "PathRefused": PathRefused,
    "StateError": StateError,
}


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


class StateEndpoints(TypedDict):
    """Where a cluster job's tasks serve their live state, and the attempt's secret that reads
    it (hex): what an API process apart from the job manager needs to route queries."""

    generation: int
    attempt: int
    secret: str
    addresses: list[str | None]


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

    def state_endpoints(self) -> StateEndpoints: ...


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

    def endpoints(args: dict[str, Any]) -> StateEndpoints:
        from_plain(CancelArgs, args, "state endpoint arguments")  # none
        return target.state_endpoints()

    return {
        "savepoint": savepoint,
        "backfill": backfill,
        "stop": stop,
        "cancel": cancel,
        "state_endpoints": endpoints,
    }


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
            "the user running weir run, with the same `state_dir`"
        ) from None


def call(port: int, key: bytes, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Ask the job manager listening on ``port`` for ``op``; its errors are raised as the same
    ``WeirError`` subclass (``ControlError`` for any other). A channel that cannot be reached,
    is not weir's, refuses the key, closes or times out is a ``ControlError``: the command was
    right, the job manager could not do it (exit 1, not a usage error)."""
    where = f"{HOST}:{port}"
    try:
        deadline = time.monotonic() + HANDSHAKE_S  # for the whole handshake, not per read
        with socket.create_connection((HOST, port), timeout=HANDSHAKE_S) as sock:
            hello = recv_frame(sock, deadline, exact=len(HELLO) + NONCE_BYTES)
            if not hello.startswith(HELLO):
                raise ControlError(f"{where} is not a weir job manager's control channel")
            ours = secrets.token_bytes(NONCE_BYTES)
            send_frame(sock, mac(key, b"client", hello[len(HELLO) :]) + ours)
            proof = recv_frame(sock, deadline, exact=MAC_BYTES)
            if not hmac.compare_digest(proof, mac(key, b"server", ours)):
                raise ControlError(f"{where} does not hold this job's control key; not asking it")
            send_frame(sock, orjson.dumps({"op": op, "args": args}))
            sock.settimeout(timeout_s + HANDSHAKE_S)
            answer = orjson.loads(recv_frame(sock, None))
    except ConnectionRefusedError:
        raise ControlError(
            f"nothing listens at {where}, the job manager's control channel; is weir run "
            "still running?"
        ) from None
    except ConnectionError:
        raise ControlError(
            f"the job manager at {where} closed the control channel (a wrong control.key, or "
            "it stopped); is weir run still running?"
        ) from None
    except TimeoutError:
        raise ControlError(f"the job manager at {where} did not answer {op} in time") from None
    except OSError as exc:
        raise ControlError(
            f"cannot reach the job manager at {where} ({exc.strerror or exc}); is weir run "
            "still running?"
        ) from None
    if "error" in answer:
        err = answer["error"]
        raise _ERRORS.get(str(err.get("type")), ControlError)(str(err.get("message")))
    result: dict[str, Any] = answer["ok"]
    return result


__all__ = [
    "HANDSHAKE_S",
    "HOST",
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
    "StateEndpoints",
    "key_path",
    "read_key",
    "write_key",
]
