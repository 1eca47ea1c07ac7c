"""Connections that never prove themselves cannot keep the job manager from a cluster task's
state server.

The audit's attack: the state server took one of its 16 slots at ``accept()`` and held it for
the 5 s handshake deadline, so another local account (``nobody``) keeping the free slots filled
with silent connections turned every read of a fresh ``weir api`` away (336 of 336 got 503).
Here a real ``StateServer`` over a real RocksDB on loopback, the attacker a process of its own
holding 200 silent connections and opening a new one for each the server drops; a fresh
reader (new connections, as a new ``weir api`` makes) reads every key while it does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import Stranger
from weir.engine.runtime.control.statereader import RemoteReader
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.stateserver import StateServer
from weir.state.rocksdb import RocksState

ROWS = {b"k%03d" % i: b"v%d" % i for i in range(50)}
SQUATTERS = 200
LIFE_S = 6.0  # how long the squatter keeps at it once it holds its connections
SQUAT_LOOP = r"""
import selectors, socket, time
held, opened = {}, 0
sel = selectors.DefaultSelector()
def one():
    global opened
    s = socket.create_connection(("127.0.0.1", __PORT__), timeout=2)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    held[s] = True
    opened += 1
for _ in range(__N__):
    one()
print("holding", len(held), flush=True)
deadline = time.monotonic() + __LIFE__
while time.monotonic() < deadline:
    for key, _ in sel.select(0.1):  # the server closed it: open another in its place
        s = key.fileobj
        sel.unregister(s)
        s.close()
        del held[s]
        try:
            one()
        except OSError:
            pass
print("opened", opened, flush=True)
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[StateServer, PeerAuth]]:
    db = tmp_path / "worker-0" / "db"
    state = RocksState(db)
    state.write(ROWS)
    auth = PeerAuth.new(3)
    server = StateServer(0, db, tmp_path / "served", auth, "127.0.0.1")
    server.start()
    try:
        yield server, auth
    finally:
        server.close()
        state.close()


def test_silent_connections_never_keep_the_job_manager_out(
    served: tuple[StateServer, PeerAuth], stranger: Stranger
) -> None:
    server, auth = served
    port = int(server.address.rsplit(":", 1)[1])
    code = SQUAT_LOOP.replace("__N__", str(SQUATTERS)).replace("__PORT__", str(port))
    squatter = stranger.popen(code.replace("__LIFE__", str(LIFE_S)))
    try:
        assert squatter.stdout is not None
        line = squatter.stdout.readline().strip()
        assert line == f"holding {SQUATTERS}", (line, squatter.communicate(timeout=30))
        answered, failed = 0, []
        started = time.monotonic()
        for i, (key, value) in enumerate(ROWS.items()):
            fresh = RemoteReader(0, lambda: (server.address, auth))  # a new weir api's reader
            try:
                assert fresh.get(key) == value
                answered += 1
            except Exception as exc:  # noqa: BLE001 - counted: every read must answer
                failed.append(f"{i}: {exc}")
            finally:
                fresh.close()
        took = time.monotonic() - started
        out, err = squatter.communicate(timeout=40)
    finally:
        if squatter.poll() is None:
            squatter.kill()
            squatter.communicate()
    assert failed == [] and answered == len(ROWS), failed[:5]
    assert took < LIFE_S - 1.0, took  # all while squatted, none waited out a handshake deadline
    # the squatter really was squatting: the server dropped what it held, and it opened more
    opened = int(out.strip().rsplit(" ", 1)[1])
    assert opened > SQUATTERS and server.refused >= SQUATTERS, (opened, server.refused, err)
