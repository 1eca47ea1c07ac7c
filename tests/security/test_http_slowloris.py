"""Slowloris against a real ``weir run`` (uvicorn on loopback): connections that never finish
their request cannot keep anyone out, and none is kept for ever.

The audit's attack: uvicorn counted idle and half-sent connections against
``--max-connections`` and timed none of them out before its head was complete, so one local
account holding 1,032 of them made every request, ``/health`` included, a 503. Here the
attacker (``nobody``) holds half again as many half-sent requests as the cap, trickling a byte
of header now and then and opening a new one for each the server closes, while the test reads
``/health`` and a key's state. (Each deadline alone: ``test_http_deadlines``.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.security.conftest import Stranger
from tests.support import WeirServer, job_text, wait_until
from weir.app.http_guard import HEAD_S

CAP = 100
HELD = 150
LIFE_S = int(HEAD_S) + 6  # past one head deadline, so closed connections are refilled
SQUAT = r"""
import selectors, socket, time
HEAD = b"GET /t1/imps/state/ad-0 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: "
sel = selectors.DefaultSelector()
held, opened, closed = set(), 0, 0
def one():
    global opened
    s = socket.create_connection(("127.0.0.1", __PORT__), timeout=2)
    s.sendall(HEAD)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    held.add(s)
    opened += 1
for _ in range(__HELD__):
    one()
print("holding", len(held), flush=True)
deadline, trickle = time.monotonic() + __LIFE__, time.monotonic()
while time.monotonic() < deadline:
    for key, _ in sel.select(0.2):  # closed by the server (or a 503): open another
        s = key.fileobj
        sel.unregister(s)
        s.close()
        held.discard(s)
        closed += 1
        try:
            one()
        except OSError:
            pass
    if time.monotonic() - trickle > 1.0:  # one more header byte on each, never the end
        trickle = time.monotonic()
        for s in list(held):
            try:
                s.send(b"x")
            except OSError:
                pass
print("opened", opened, "closed", closed, flush=True)
"""


@pytest.fixture
def server(tmp_path: Path, weir_server: Callable[..., WeirServer]) -> WeirServer:
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=100, size=500, lateness=0))
    started = weir_server(
        job,
        "--source", "generator://ads?rate=500&ids=20&seed=1",
        "--max-connections", str(CAP),
    )  # fmt: skip
    client = started.client()
    wait_until(lambda: client.get("/t1/imps/state/ad-0").status_code == 200, 30.0, what="ad-0")
    return started


def _port(server: WeirServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def _get_once_retried(server: WeirServer, path: str) -> int:
    """GET ``path`` on a new connection, retried once on a new connection if the server closed
    it before answering, as a browser retries an idempotent request. On loopback the squatter
    and the client share an address, so the oldest-first rule is the defence: a connection
    whose head is slow to come (the client descheduled on a loaded machine while the squatter
    reconnects a hundred times) can be the oldest and go; the next one is heard."""
    for attempt in (1, 2):
        try:
            with httpx.Client(base_url=server.base_url, trust_env=False, timeout=5) as c:
                return c.get(path).status_code
        except httpx.RemoteProtocolError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_held_half_sent_requests_past_the_cap_never_keep_health_or_state_out(
    server: WeirServer, stranger: Stranger
) -> None:
    code = SQUAT.replace("__PORT__", str(_port(server))).replace("__HELD__", str(HELD))
    squatter = stranger.popen(code.replace("__LIFE__", str(LIFE_S)))
    statuses: list[tuple[str, int]] = []
    try:
        assert squatter.stdout is not None
        line = squatter.stdout.readline().strip()
        assert line == f"holding {HELD}", (line, squatter.communicate(timeout=30))
        started = time.monotonic()
        while time.monotonic() - started < HEAD_S + 3:  # past a head deadline: still refilled
            for path in ("/health", "/t1/imps/state/ad-0"):
                statuses.append((path, _get_once_retried(server, path)))
            time.sleep(0.2)
        out, err = squatter.communicate(timeout=LIFE_S + 20)
    finally:
        if squatter.poll() is None:
            squatter.kill()
            squatter.communicate()
    assert statuses and all(code == 200 for _, code in statuses), [
        s for s in statuses if s[1] != 200
    ][:5]
    opened, closed = (int(x) for x in out.split()[1::2])
    assert opened >= HELD and closed >= HELD - CAP, (out, err)  # the server closed its surplus
    assert "http: dropped" in server.stderr()
