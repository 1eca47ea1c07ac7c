"""The exchange's handshake: both ends prove they hold the run's secret before a frame is read.

The job manager makes a secret (32 random bytes) for every attempt of a run and hands it to its
workers in their spawn arguments (the private pipe to each child); it is never written to a
file. A worker that connects (the *connector*, the higher index) and the worker it connects to
(the *listener*) then exchange fixed-length messages:

    connector -> listener   hello   = magic, attempt, connector's index, connector's nonce
    listener  -> connector  answer  = magic, attempt, listener's index, listener's nonce,
                                      HMAC(secret, "listener" + hello + answer's head)
    connector -> listener   proof   = HMAC(secret, "connector" + hello + answer's head)

Each MAC covers both nonces, both indexes and the attempt, so a recorded handshake replayed to
either side fails (the other side's nonce is new), and a connection from an earlier attempt of
the run is refused (another attempt number, and another secret). MACs are compared with
``hmac.compare_digest``. These are pure functions over bytes; ``exchange`` does the I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct
from dataclasses import dataclass

from weir.engine.runtime.netio import recv_exact

MAGIC = b"weirX\x00\x00\x01"  # the exchange's handshake, version 1
SECRET_BYTES = 32
NONCE_BYTES = 32
MAC_BYTES = 32
_HEAD = struct.Struct(f">8sQI{NONCE_BYTES}s")  # magic, attempt, index, nonce
HELLO_BYTES = _HEAD.size
ANSWER_BYTES = _HEAD.size + MAC_BYTES
PROOF_BYTES = MAC_BYTES
# the index a job manager proves itself with (to its tasks' state servers, and as the listener
# its cluster tasks connect to): no worker has it
MANAGER = 0xFFFF_FFFF


class AuthFailed(Exception):
    """A peer that did not prove it belongs to this attempt of the run (message: why)."""


@dataclass(frozen=True, slots=True)
class PeerAuth:
    """What a worker proves itself with: the attempt's secret and the attempt's number."""

    secret: bytes
    attempt: int

    def __post_init__(self) -> None:
        if len(self.secret) != SECRET_BYTES:
            raise ValueError(f"an exchange secret has {SECRET_BYTES} bytes, not {len(self.secret)}")

    @staticmethod
    def new(attempt: int) -> PeerAuth:
        return PeerAuth(secrets.token_bytes(SECRET_BYTES), attempt)

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"PeerAuth(attempt={self.attempt})"


@dataclass(frozen=True, slots=True)
class Head:
    attempt: int
    index: int
    nonce: bytes


def _mac(auth: PeerAuth, role: bytes, *parts: bytes) -> bytes:
    return hmac.new(auth.secret, role + b"".join(parts), hashlib.sha256).digest()


def _parse(raw: bytes, auth: PeerAuth) -> Head:
    if len(raw) != _HEAD.size:
        raise AuthFailed(f"a handshake message of {len(raw)} bytes, not {_HEAD.size}")
    magic, attempt, index, nonce = _HEAD.unpack(raw)
    if magic != MAGIC:
        raise AuthFailed(f"not a weir exchange handshake (starts {magic!r})")
    if attempt != auth.attempt:
        raise AuthFailed(f"a peer of attempt {attempt}, not this attempt {auth.attempt}")
    return Head(attempt, index, nonce)


def hello(auth: PeerAuth, index: int) -> bytes:
    """The connector's first message (keep it: the proof covers it)."""
    return _HEAD.pack(MAGIC, auth.attempt, index, secrets.token_bytes(NONCE_BYTES))


def read_hello(auth: PeerAuth, raw: bytes) -> Head:
    """The listener's reading of a hello (not proof of anything yet)."""
    return _parse(raw, auth)


def answer(auth: PeerAuth, index: int, hello_raw: bytes) -> bytes:
    """The listener's reply to ``hello_raw``: its own head and its MAC over both."""
    head = _HEAD.pack(MAGIC, auth.attempt, index, secrets.token_bytes(NONCE_BYTES))
    return head + _mac(auth, b"listener", hello_raw, head)


def check_answer(auth: PeerAuth, hello_raw: bytes, raw: bytes, expected_index: int) -> bytes:
    """The connector's check of the listener's answer; returns the proof to send back."""
    if len(raw) != ANSWER_BYTES:
        raise AuthFailed(f"an answer of {len(raw)} bytes, not {ANSWER_BYTES}")
    head, mac = raw[: _HEAD.size], raw[_HEAD.size :]
    found = _parse(head, auth)
    if not hmac.compare_digest(mac, _mac(auth, b"listener", hello_raw, head)):
        raise AuthFailed("the listener does not hold this run's exchange secret")
    if found.index != expected_index:
        raise AuthFailed(f"the listener says it is worker {found.index}, not {expected_index}")
    return _mac(auth, b"connector", hello_raw, head)


def check_proof(auth: PeerAuth, hello_raw: bytes, answer_raw: bytes, proof: bytes) -> None:
    """The listener's check of the connector's proof."""
    expected = _mac(auth, b"connector", hello_raw, answer_raw[: _HEAD.size])
    if len(proof) != PROOF_BYTES or not hmac.compare_digest(proof, expected):
        raise AuthFailed("the connector does not hold this run's exchange secret")


def prove(sock: socket.socket, auth: PeerAuth, index: int, listener: int, deadline: float) -> None:
    """The connector's side of the handshake on a connected socket: as worker ``index`` (or
    ``MANAGER``), to the listener that must prove it is ``listener``."""
    ours = hello(auth, index)
    sock.sendall(ours)
    raw = recv_exact(sock, ANSWER_BYTES, deadline)
    sock.sendall(check_answer(auth, ours, raw, listener))
