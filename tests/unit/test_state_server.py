"""A cluster task's state server (``task.stateserver``) and the job manager's reader of it
(``control.statereader``), on a real RocksDB under tmp_path and real loopback sockets: the
reader answers as the local secondary reader does, and nobody without the attempt's secret (or
claiming to be a worker rather than the job manager) reads a byte."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from weir.base.errors import StateError
from weir.engine.runtime import peerauth
from weir.engine.runtime.control.statereader import CONNECT_TRIES, RemoteReader
from weir.engine.runtime.netio import recv_exact
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.stateserver import HANDSHAKE_S, StateServer
from weir.state.rocksdb import RocksState
from weir.state.secondary import SecondaryReader

ROWS = {b"k%03d" % i: b"v%d" % i for i in range(50)}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[StateServer, PeerAuth, RocksState, Path]]:
    db = tmp_path / "worker-0" / "db"
    state = RocksState(db)
    state.write(ROWS)
    auth = PeerAuth.new(3)
    server = StateServer(1, db, tmp_path / "served", auth, "127.0.0.1")
    server.start()
    try:
        yield server, auth, state, tmp_path
    finally:
        server.close()
        state.close()


def _reader(server: StateServer, auth: PeerAuth | None) -> RemoteReader:
    return RemoteReader(1, lambda: (server.address, auth))


def test_remote_reads_equal_local_secondary_reads(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
) -> None:
    server, auth, state, tmp = served
    remote = _reader(server, auth)
    local = SecondaryReader(tmp / "worker-0" / "db", tmp / "local-secondary")
    try:
        assert remote.scan(b"k010", b"k020") == local.scan(b"k010", b"k020")
        assert remote.scan(b"k", b"l", 3) == local.scan(b"k", b"l", 3)
        assert remote.get(b"k007") == b"v7" and remote.get(b"nope") is None
        both = [(b"k001", b"k003"), (b"k040", b"k041"), (b"x", b"y")]
        assert remote.scan_ranges(both) == local.scan_ranges(both)  # one request for all
        it = remote.iterator(b"k030")
        it.seek(b"k0285")
        assert it.valid() and it.key() == b"k029"
        it.seek(b"k030")
        assert not it.valid()
        assert remote.caught_up_at > time.time() - 60
        state.write({b"k999": b"new"})  # the worker writes on: the server's secondary follows
        deadline = time.monotonic() + 5
        while remote.get(b"k999") is None and time.monotonic() < deadline:
            time.sleep(0.03)
        assert remote.get(b"k999") == b"new"
    finally:
        remote.close()
        local.close()


def test_an_expired_remote_reader_sees_a_write_at_its_next_read(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
) -> None:
    """``expire`` reaches the task's own reader: the next answer is caught up past the write
    (the server's reader follows within its bound otherwise, up to 40 ms late)."""
    server, auth, state, _tmp = served
    remote = _reader(server, auth)
    # the bound two minutes, set before the first read starts the reader's follower: only an
    # expiry catches up within the test
    server._reader._catch_up_s = 60.0
    try:
        assert remote.get(b"k001") == b"v1"
        state.write({b"k998": b"new"})
        assert remote.get(b"k998") is None
        remote.expire()
        assert remote.get(b"k998") == b"new"
    finally:
        remote.close()


def test_reader_without_the_secret_is_refused(
    served: tuple[StateServer, PeerAuth, RocksState, Path], caplog: pytest.LogCaptureFixture
) -> None:
    server, auth, _, _ = served
    stranger = _reader(server, PeerAuth.new(auth.attempt))  # same attempt, other secret
    with pytest.raises(StateError, match="does not hold this run's exchange secret"):
        stranger.get(b"k001")
    earlier = _reader(server, PeerAuth(auth.secret, auth.attempt - 1))  # a previous attempt's
    with pytest.raises(StateError, match="closed the connection"):
        earlier.get(b"k001")
    # the server closes a refused handshake, which a reader cannot tell from one dropped under
    # a flood: the earlier attempt's reader tried each of its CONNECT_TRIES, each refused
    refusals = 1 + CONNECT_TRIES
    deadline = time.monotonic() + 5
    while server.refused < refusals and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.refused == refusals
    assert "a peer of attempt 2, not this attempt 3" in caplog.text
    assert _reader(server, auth).get(b"k001") == b"v1"  # the server still serves


def test_a_worker_may_not_read_another_workers_state(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
) -> None:
    """Holding the secret as a worker (index 0) is not being the job manager."""
    server, auth, _, _ = served
    _, where = server.address.split(":", 1)
    host, port = where.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(peerauth.hello(auth, 0))
        with pytest.raises(ConnectionError):
            recv_exact(s, peerauth.ANSWER_BYTES, time.monotonic() + HANDSHAKE_S + 2)
    assert server.refused >= 1


def test_no_request_is_read_before_the_handshake(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
) -> None:
    """A request sent in place of a handshake is never answered with state."""
    server, _, _, _ = served
    host, port = server.address.removeprefix("tcp:").rsplit(":", 1)
    raw = msgpack.packb(["get", b"k001"])
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(len(raw).to_bytes(4, "big") + raw + bytes(peerauth.HELLO_BYTES))
        with pytest.raises(ConnectionError):
            recv_exact(s, 1, time.monotonic() + HANDSHAKE_S + 2)


def test_not_serving_yet_and_gone_are_state_errors(tmp_path: Path) -> None:
    auth = PeerAuth.new(1)
    with pytest.raises(StateError, match="not serving its state yet"):
        RemoteReader(0, lambda: (None, None)).get(b"k")
    gone = socket.create_server(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()
    with pytest.raises(StateError, match=f"worker 0 at tcp:127.0.0.1:{port} is unreachable"):
        RemoteReader(0, lambda: (f"tcp:127.0.0.1:{port}", auth)).get(b"k")


def test_a_restarted_server_is_reached_again(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
) -> None:
    """A pooled connection to a server that went away is replaced once, without an error."""
    server, auth, _, tmp = served
    where = {"server": server}
    reader = RemoteReader(1, lambda: (where["server"].address, auth))
    assert reader.get(b"k001") == b"v1"
    server.close()
    again = StateServer(1, tmp / "worker-0" / "db", tmp / "served-2", auth, "127.0.0.1")
    again.start()
    where["server"] = again
    try:
        assert reader.get(b"k002") == b"v2"
    finally:
        again.close()
        reader.close()


def test_a_handshake_the_server_closed_is_tried_again_on_a_new_connection(
    served: tuple[StateServer, PeerAuth, RocksState, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a flood of silent connections the server drops the oldest handshake in progress
    for each new one past its cap (``tests/security/test_state_server_slots.py``): a fresh
    reader whose handshake was dropped connects again instead of failing the request; a refused
    proof is never tried again."""
    from weir.engine.runtime.control import statereader

    server, auth, _, _ = served
    real, calls = statereader.prove, []

    def dropped_first(sock: socket.socket, *args: object) -> None:
        calls.append(sock.getsockname())
        if len(calls) == 1:
            raise ConnectionError("the other side closed the connection")
        real(sock, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(statereader, "prove", dropped_first)
    reader = _reader(server, auth)
    try:
        assert reader.get(b"k007") == b"v7"
        assert len(calls) == 2 and calls[0] != calls[1]  # a new connection the second time
        assert reader.scan_ranges([(b"k001", b"k003"), (b"k040", b"k041")]) == [
            [(b"k001", b"v1"), (b"k002", b"v2")],
            [(b"k040", b"v40")],
        ]
    finally:
        reader.close()
    wrong = _reader(server, PeerAuth.new(3))  # another attempt's secret: refused, once
    calls.clear()
    with pytest.raises(StateError):
        wrong.get(b"k007")
    assert len(calls) <= statereader.CONNECT_TRIES


@pytest.mark.parametrize(
    "ranges",
    [b"k0", [[b"k0"]], [[b"k0", 7]], [(b"a", b"b")] * 17, [[b"a", b"b", b"c"]]],
    ids=["not-a-list", "one-bound", "not-bytes", "too-many", "three-bounds"],
)
def test_malformed_ranges_are_an_error_answer_and_the_connection_goes_on(
    served: tuple[StateServer, PeerAuth, RocksState, Path], ranges: object
) -> None:
    server, auth, _, _ = served
    remote = _reader(server, auth)
    try:
        with pytest.raises(StateError, match="ranges"):
            remote.call("ranges", ranges)
        assert remote.scan_ranges([(b"k001", b"k002")]) == [[(b"k001", b"v1")]]
    finally:
        remote.close()


def test_a_read_that_fails_in_the_worker_is_answered_with_its_reason(
    served: tuple[StateServer, PeerAuth, RocksState, Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An ``OSError`` from the server's own reader (reopening its secondary) closed the
    connection as if the job manager had gone away, or killed the serving thread: the API
    then said only that the state server stopped answering. It is an answer now, naming why,
    and the connection serves the next read."""
    server, auth, _, _ = served
    real = server._ops["get"]
    calls: list[bytes] = []

    def failing_once(key: bytes) -> Any:
        calls.append(key)
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied", "served/readers")
        return real(key)

    monkeypatch.setitem(server._ops, "get", failing_once)
    remote = _reader(server, auth)
    try:
        with pytest.raises(StateError, match="get: PermissionError: .*Permission denied"):
            remote.get(b"k007")
        assert remote.get(b"k007") == b"v7"
    finally:
        remote.close()
    assert "state server: worker=1 get failed" in caplog.text
