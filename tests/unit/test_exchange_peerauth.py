"""The exchange's handshake as pure functions (``task.peerauth``): both sides prove the secret
over both nonces, and every way of getting it wrong is refused with the reason."""

from __future__ import annotations

import pytest

from weir.engine.runtime import peerauth
from weir.engine.runtime.peerauth import AuthFailed, PeerAuth


def _handshake(listener: PeerAuth, connector: PeerAuth) -> tuple[bytes, bytes, bytes]:
    hello = peerauth.hello(connector, 3)
    head = peerauth.read_hello(listener, hello)
    assert (head.attempt, head.index) == (connector.attempt, 3)
    answer = peerauth.answer(listener, 1, hello)
    proof = peerauth.check_answer(connector, hello, answer, 1)
    return hello, answer, proof


def test_a_handshake_between_holders_of_the_secret_succeeds() -> None:
    auth = PeerAuth.new(7)
    hello, answer, proof = _handshake(auth, auth)
    assert len(hello) == peerauth.HELLO_BYTES and len(answer) == peerauth.ANSWER_BYTES
    assert len(proof) == peerauth.PROOF_BYTES
    peerauth.check_proof(auth, hello, answer, proof)


def test_each_side_refuses_a_peer_without_the_secret() -> None:
    auth, other = PeerAuth.new(0), PeerAuth(PeerAuth.new(0).secret, 0)
    hello = peerauth.hello(other, 2)
    answer = peerauth.answer(auth, 1, hello)
    with pytest.raises(AuthFailed, match="the listener does not hold this run's exchange secret"):
        peerauth.check_answer(other, hello, answer, 1)
    with pytest.raises(AuthFailed, match="the connector does not hold"):
        peerauth.check_proof(auth, hello, answer, bytes(32))
    real = peerauth.check_answer(auth, hello, answer, 1)
    peerauth.check_proof(auth, hello, answer, real)  # a holder's proof passes


def test_a_replayed_proof_fails_against_a_new_answer() -> None:
    auth = PeerAuth.new(1)
    hello, _, proof = _handshake(auth, auth)
    fresh = peerauth.answer(auth, 1, hello)  # the listener's next nonce
    with pytest.raises(AuthFailed, match="does not hold"):
        peerauth.check_proof(auth, hello, fresh, proof)


def test_a_replayed_answer_fails_against_a_new_hello() -> None:
    auth = PeerAuth.new(1)
    _, answer, _ = _handshake(auth, auth)
    with pytest.raises(AuthFailed, match="the listener does not hold"):
        peerauth.check_answer(auth, peerauth.hello(auth, 3), answer, 1)


def test_another_attempt_wrong_lengths_magic_and_index_are_refused() -> None:
    auth = PeerAuth.new(5)
    stale = PeerAuth(auth.secret, 4)
    with pytest.raises(AuthFailed, match="a peer of attempt 4, not this attempt 5"):
        peerauth.read_hello(auth, peerauth.hello(stale, 1))
    with pytest.raises(AuthFailed, match="a handshake message of 51 bytes, not 52"):
        peerauth.read_hello(auth, peerauth.hello(auth, 1)[:-1])
    with pytest.raises(AuthFailed, match="not a weir exchange handshake"):
        peerauth.read_hello(auth, b"x" * peerauth.HELLO_BYTES)
    hello = peerauth.hello(auth, 2)
    answer = peerauth.answer(auth, 1, hello)
    with pytest.raises(AuthFailed, match="an answer of 83 bytes, not 84"):
        peerauth.check_answer(auth, hello, answer[:-1], 1)
    with pytest.raises(AuthFailed, match="says it is worker 1, not 0"):
        peerauth.check_answer(auth, hello, answer, 0)
    proof = peerauth.check_answer(auth, hello, answer, 1)
    with pytest.raises(AuthFailed, match="does not hold"):
        peerauth.check_proof(auth, hello, answer, proof[:-1])


def test_the_secret_has_32_bytes_and_never_shows() -> None:
    auth = PeerAuth.new(2)
    assert len(auth.secret) == 32 and auth.secret != PeerAuth.new(2).secret
    assert auth.secret.hex() not in repr(auth) and repr(auth) == "PeerAuth(attempt=2)"
    with pytest.raises(ValueError, match="32 bytes, not 5"):
        PeerAuth(b"short", 0)
