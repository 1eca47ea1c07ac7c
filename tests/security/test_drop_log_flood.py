"""A flood of connections that never prove themselves costs the log a few lines, not one a
connection: the audit's flood wrote 5.2 MiB of WARNINGs in 20 s. Against a real ``weir run``'s
control channel (the attacker, ``nobody``, opens 1,500 connections without the job's key) and
against the exchange's acceptor on loopback (600 garbage handshakes before the real peer): the
first drop of a reason is logged at once, the rest are summed up per reason and interval, every
drop is counted, and the real clients still get through."""

from __future__ import annotations

import logging
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.security.conftest import Stranger
from tests.security.test_exchange_control import JOB, _port
from tests.support import WeirServer, wait_until
from weir.engine.runtime import droplog, peerauth
from weir.engine.runtime.control import admin
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task import acceptor
from weir.engine.runtime.task.exchange import prove

FLOOD = 1_500
FLOOD_CODE = r"""
import socket, struct
for _ in range(__N__):
    try:
        with socket.create_connection(("127.0.0.1", __PORT__), timeout=5) as s:
            s.recv(4 + 14 + 32)
            s.sendall(struct.pack(">I", 64) + b"\0" * 64)
            s.recv(1)
    except OSError:
        pass
print("done", flush=True)
"""
_COUNT = re.compile(r"count=(\d+)")


def _drop_lines(text: str, what: str) -> list[str]:
    return [line for line in text.splitlines() if f"{what} dropped" in line]


def _dropped_total(lines: list[str]) -> int:
    """Drops the lines account for: a line without a count is one drop."""
    return sum(int(m.group(1)) if (m := _COUNT.search(line)) else 1 for line in lines)


def test_a_flood_on_the_control_channel_is_a_few_counted_lines(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    stranger: Stranger,
) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    server = weir_server(job, "--no-api", "--parallelism", "2")
    port = _port(server)
    flood = stranger.run(
        FLOOD_CODE.replace("__N__", str(FLOOD)).replace("__PORT__", str(port)), timeout_s=120.0
    )
    assert flood.stdout.strip() == "done", flood.stderr
    # the counts of the flood's last interval come out once the interval has passed
    wait_until(
        lambda: _dropped_total(_drop_lines(server.stderr(), "control:")) >= FLOOD,
        droplog.INTERVAL_S + 15.0,
        what="every dropped connection to be counted in the log",
    )
    lines = _drop_lines(server.stderr(), "control:")
    assert _dropped_total(lines) == FLOOD, lines
    # a first line and at most one a reason per 10 s: the flood took a few seconds here
    assert len(lines) <= 8, f"{len(lines)} lines for {FLOOD} drops: {lines[:5]}"
    assert any("reason=a connection without the job's key was refused" in ln for ln in lines)
    # the job manager still answers a holder of the key
    taken = admin.call(port, admin.read_key(server.job_dir), "savepoint", {"timeout_s": 20.0}, 30.0)
    assert taken["path"]


def test_a_flood_on_the_exchange_acceptor_is_a_few_counted_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = PeerAuth.new(3)
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()
    accept = acceptor.Acceptor(0, frozenset({1}), auth, listener)
    garbage = 600
    sent = threading.Event()

    def flood_then_connect() -> None:
        for _ in range(garbage):
            with socket.create_connection(address, timeout=5.0) as s:
                s.sendall(b"\x80" + os.urandom(peerauth.HELLO_BYTES - 1))  # a new text each
                try:
                    s.recv(1)  # the acceptor closes it: one drop each, in order
                except OSError:
                    pass
        sent.set()
        real = socket.create_connection(address, timeout=5.0)
        prove(real, auth, 1, 0, time.monotonic() + 10.0)
        real.close()

    thread = threading.Thread(target=flood_then_connect, daemon=True)
    with caplog.at_level(logging.WARNING, logger=acceptor.__name__):
        thread.start()
        try:
            proved = accept.run(lambda: False, time.monotonic() + 60.0)
        finally:
            listener.close()
            thread.join(20.0)
    assert sent.is_set() and set(proved) == {1}
    for s in proved.values():
        s.close()
    assert accept.refused == garbage
    lines = _drop_lines(caplog.text, "exchange: worker=0")
    assert _dropped_total(lines) == garbage, lines
    assert len(lines) <= 6, f"{len(lines)} lines for {garbage} drops: {lines[:5]}"
    assert "reason=not a weir exchange handshake" in lines[0]


def test_a_connection_reset_before_its_accept_does_not_stop_the_acceptor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that connects and resets at once (a port scanner, a health check closing with
    linger 0) left no peer to name once accepted: ``getpeername`` raised, and the exception
    ended a cluster task's state server acceptor for good, every later live read of that
    worker failing its handshake. It is one more counted drop now, and the next client is
    served."""
    auth = PeerAuth.new(3)
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()
    accept = acceptor.Acceptor(0, frozenset({1}), auth, listener, "state server")
    for _ in range(3):  # in the listen queue, reset, before the acceptor runs
        scan = socket.create_connection(address, timeout=5.0)
        scan.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        scan.close()
    proved: list[int] = []
    stop = threading.Event()
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            accept.serve(stop.is_set, lambda index, sock: (proved.append(index), sock.close()))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            failed.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    with caplog.at_level(logging.WARNING, logger=acceptor.__name__):
        thread.start()
        try:
            real = socket.create_connection(address, timeout=5.0)
            prove(real, auth, 1, 0, time.monotonic() + 10.0)
            real.close()
            wait_until(lambda: proved or failed, 10.0, what="the real client to be proved")
        finally:
            stop.set()
            thread.join(10.0)
            listener.close()
    assert not failed, f"the acceptor stopped: {failed[0]!r}"
    assert proved == [1]
    assert "reason=gone before its handshake" in caplog.text
