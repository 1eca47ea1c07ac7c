"""Attacks on the HTTP surface of a real ``weir run`` (uvicorn on loopback, no token): a
DNS-rebinding page's requests (a foreign ``Host``), a 59 MB body declared or chunked, a flood of
event streams and of connections. The job must keep checkpointing through all of them.

One server serves the whole module; it starts with a soft open-file limit of 256 (the hard one
unchanged), so the test also sees that weir raises it."""

from __future__ import annotations

import asyncio
import resource
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from tests.security._http import raw_request
from tests.support import WeirServer, job_text, rss_bytes, wait_until
from weir.api import ApiSettings, Registry, create_app
from weir.api.guards import ALLOWED_SEEN, AllowedHosts, allowed_hosts
from weir.engine.runtime.control import status

GENERATOR = "generator://ads?rate=2000&ids=50&seed=1&clock=synthetic&disorder=50"
MAX_STREAMS = 3
MAX_CONNECTIONS = 24
LOW_SOFT_NOFILE = 256
BIG = 59 * 1000 * 1000
RSS_SLACK = 40 * 1024 * 1024


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> WeirServer:
    tmp = tmp_path_factory.mktemp("guards")
    job = tmp / "job.py"
    job.write_text(job_text(tmp / "unused.jsonl", bound=100, size=500, lateness=0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(LOW_SOFT_NOFILE, hard), hard))
    try:  # the child inherits the low soft limit, as from a login shell's default
        started = module_weir_server(
            job,
            "--source", GENERATOR,
            "--checkpoint-dir", str(tmp / "chk"),
            "--checkpoint-interval-ms", "300",
            "--max-streams", str(MAX_STREAMS),
            "--max-connections", str(MAX_CONNECTIONS),
        )  # fmt: skip
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    client = started.client()
    wait_until(
        lambda: client.get("/t1/imps/state/ad-0").status_code == 200, 30.0, what="ad-0's state"
    )
    return started


def _checkpoints(server: WeirServer) -> int:
    """Completed checkpoints, from the job manager's status file (the API may be the one
    refusing)."""
    found = status.read_status(status.status_path(server.job_dir))
    assert found is not None and found.state == "running", found
    return found.completed_checkpoints


def _head(port: int, host: str, path: str = "/t1/imps/state/ad-0") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def _status_and_body(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_a_rebinding_page_cannot_read_state(server: WeirServer) -> None:
    port = int(server.base_url.rsplit(":", 1)[1])
    status, body = _status_and_body(raw_request(port, _head(port, f"attacker.example:{port}")))
    assert status == 421, body
    error = orjson.loads(body)["error"]
    assert error["code"] == "host_not_allowed"
    assert "'attacker.example:" in error["message"] and "--allowed-hosts" in error["message"]
    assert "WEIR_ALLOWED_HOSTS" in error["message"]
    for host in ("localhost", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port}", "[::1]"):
        status, body = _status_and_body(raw_request(port, _head(port, host)))
        assert status == 200, (host, body)


def test_allowed_hosts_and_the_token_decide_which_hosts_answer(tmp_path: Path) -> None:
    def get(settings: ApiSettings, host: str) -> int:
        client = TestClient(create_app(Registry(), settings), base_url=f"http://{host}")
        headers = {"Authorization": "Bearer t"} if settings.token else {}
        return client.get("/jobs", headers=headers).status_code

    assert get(ApiSettings(allowed_hosts=("weir.internal",)), "weir.internal:8000") == 200
    assert get(ApiSettings(allowed_hosts=("weir.internal",)), "evil.example") == 421
    assert get(ApiSettings(host="127.0.0.5"), "127.0.0.5:8000") == 200
    assert get(ApiSettings(token="t", host="0.0.0.0"), "job:8000") == 200  # the token guards
    assert get(ApiSettings(token="t", allowed_hosts=("job",)), "other:8000") == 421


def _chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    """A JSON lookup body of ``total`` bytes, in ``size`` pieces."""
    yield b'{"keys": ["'
    sent = 11
    piece = b"k" * size
    while sent + size < total:
        yield piece
        sent += size
    yield b'"]}'


def _chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def test_a_59_mb_body_is_refused_without_being_read(server: WeirServer) -> None:
    port = int(server.base_url.rsplit(":", 1)[1])
    pid = server.proc.pid
    before = rss_bytes(pid)
    declared = (
        f"POST /t1/imps/lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BIG}\r\n\r\n"
    ).encode()
    status, body = _status_and_body(raw_request(port, declared, _chunks(BIG)))
    assert status == 413, body
    error = orjson.loads(body)["error"]
    assert error["code"] == "body_too_large" and str(BIG) in error["message"]
    chunked = (
        b"POST /t1/imps/lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    status, body = _status_and_body(raw_request(port, chunked, _chunked(_chunks(BIG))))
    assert status == 413, body
    assert "limit of 1048576 bytes" in orjson.loads(body)["error"]["message"]
    grown = rss_bytes(pid) - before
    assert grown < RSS_SLACK, f"the server grew by {grown / 2**20:.0f} MiB"
    ok = server.client().post("/t1/imps/lookup", json={"keys": ["ad-0"]})
    assert ok.status_code == 200, ok.text


def test_a_stream_flood_gets_503_and_checkpoints_go_on(server: WeirServer) -> None:
    stream_url = f"{server.base_url}/t1/imps/state/ad-0/stream"
    with ExitStack() as held:
        opened = []
        for _ in range(MAX_STREAMS):
            c = held.enter_context(httpx.Client(timeout=10.0, trust_env=False))
            r = held.enter_context(c.stream("GET", stream_url))
            assert r.status_code == 200
            opened.append(r)
        first = _checkpoints(server)
        refused = 0
        for _ in range(4 * MAX_STREAMS):
            with httpx.Client(timeout=10.0, trust_env=False) as c, c.stream("GET", stream_url) as r:
                r.read()
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "5"
                assert orjson.loads(r.content)["error"]["code"] == "too_many_streams"
                refused += 1
        assert refused == 4 * MAX_STREAMS
        wait_until(lambda: _checkpoints(server) >= first + 2, 20.0, what="two more checkpoints")
    # the held streams are gone: a new one is served
    with httpx.Client(timeout=10.0, trust_env=False) as c:
        wait_until(lambda: _opens(c, stream_url), 10.0, what="a stream slot to free")


def _opens(c: httpx.Client, url: str) -> bool:
    with c.stream("GET", url) as r:
        return r.status_code == 200


def test_a_connection_flood_never_keeps_a_request_out_and_checkpoints_go_on(
    server: WeirServer,
) -> None:
    """Silent connections past --max-connections: the one waiting longest is closed for each
    new one, so /health and state still answer (they once got 503: test_http_slowloris)."""
    port = int(server.base_url.rsplit(":", 1)[1])
    first = _checkpoints(server)
    with ExitStack() as held:
        for _ in range(2 * MAX_CONNECTIONS):
            held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10.0))
        for path in ("/health", "/t1/imps/state/ad-0"):
            status, _ = _status_and_body(raw_request(port, _head(port, "127.0.0.1", path)))
            assert status == 200, path
        wait_until(lambda: _checkpoints(server) >= first + 2, 20.0, what="two more checkpoints")


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(server: WeirServer) -> None:
    limits = Path(f"/proc/{server.proc.pid}/limits").read_text()
    row = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    soft, hard = row.split()[3:5]
    assert soft == hard, row


def test_remembered_hosts_never_let_a_refused_one_in_and_stay_bounded() -> None:
    """``AllowedHosts`` remembers the Host headers it allowed (a client repeats its own): a
    refused one is refused again every time, and a client sending ever new allowed spellings
    never grows the memory past ``ALLOWED_SEEN``."""
    passed: list[bytes] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(dict(scope["headers"])[b"host"])

    guard = AllowedHosts(app, allowed_hosts("127.0.0.1", ()))

    async def call(host: bytes) -> None:
        async def send(message: Message) -> None:
            return None

        scope = {"type": "http", "method": "GET", "path": "/jobs", "headers": [(b"host", host)]}
        await guard(scope, None, send)  # type: ignore[arg-type]

    async def run() -> None:
        for _ in range(3):
            await call(b"127.0.0.1:8000")
            await call(b"attacker.example:8000")
        for port in range(2 * ALLOWED_SEEN):
            await call(b"localhost:%d" % port)
        await call(b"attacker.example:8000")

    asyncio.run(run())
    assert passed[:3] == [b"127.0.0.1:8000"] * 3 and b"attacker.example:8000" not in passed
    assert len(passed) == 3 + 2 * ALLOWED_SEEN
    assert len(guard.hosts._allowed) == ALLOWED_SEEN
