"""The point lookups weir's HTTP protocol answers below ASGI (``api.fastpath.DirectAnswer``,
decision 0027) never pass what the middleware would refuse or change: a wrong, missing or
doubled token, a foreign or doubled ``Host``, a CORS request, a stream token in the query, an
unguarded API. Each such request is answered by the ASGI path, as before; and a direct answer
never overtakes a pipelined request ahead of it. Over uvicorn on loopback in this process and a
real RocksDB read through a secondary instance."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.security._http import (
    direct_protocol,
    raw_request,
    serve,
    sliding_job,
    write_keys,
)
from tests.support import FixedRuntime
from weir.api import ApiSettings, JobHandle, Registry, create_app
from weir.state.secondary import SecondaryReader

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    tmp: Path = tmp_path_factory.mktemp("direct")
    job = sliding_job(tmp)
    write_keys(tmp / "db", job, [f"k-{i}" for i in range(20)], frozenset())
    reg = Registry()
    reg.add(JobHandle(job, FixedRuntime(tmp / "chk"), [SecondaryReader(tmp / "db", tmp / "sec")]))
    yield reg
    reg.close()


@contextmanager
def served(registry: Registry, settings: ApiSettings) -> Iterator[tuple[int, list[bool]]]:
    """The app on weir's protocol; yields its port and, for each request offered to the
    direct answers, whether they answered it."""
    app = create_app(registry, settings)
    protocol, offered = direct_protocol(app)
    with serve(app, http=protocol) as server:
        yield server.port, offered


def _get(port: int, headers: list[tuple[str, str]], path: str) -> httpx.Response:
    """``GET path`` with exactly ``headers`` (repeated ones too, which httpx will not send;
    ``Host: 127.0.0.1`` unless given), over a socket of its own (``raw_request``)."""
    if not any(name == "Host" for name, _ in headers):
        headers = [("Host", "127.0.0.1"), *headers]
    head = f"GET {path} HTTP/1.1\r\n" + "".join(f"{n}: {v}\r\n" for n, v in headers)
    raw, _, body = raw_request(port, head.encode() + b"\r\n").partition(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    fields = [(n, v) for n, _, v in (line.partition(": ") for line in lines[1:])]
    return httpx.Response(int(lines[0].split()[1]), headers=fields, content=body)


AUTH = ("Authorization", f"Bearer {TOKEN}")
WRONG = ("Authorization", "Bearer guessed")
K1 = "/j/op/state/k-1"
EVIL, LOCAL = ("Host", "attacker.example"), ("Host", "localhost")
DASH = "http://dash.example"


@pytest.mark.parametrize(
    ("settings", "headers", "path", "status"),
    [
        (ApiSettings(token=TOKEN), [], K1, 401),
        (ApiSettings(token=TOKEN), [WRONG], K1, 401),
        # RequireToken reads the last of two: a right one first must not open the door
        (ApiSettings(token=TOKEN), [AUTH, WRONG], K1, 401),
        (ApiSettings(token=TOKEN), [WRONG, AUTH], K1, 200),
        (ApiSettings(token=TOKEN), [AUTH], K1 + "?access_token=x", 200),
        (ApiSettings(), [EVIL], K1, 421),
        # AllowedHosts reads the first of two
        (ApiSettings(), [EVIL, LOCAL], K1, 421),
        (ApiSettings(), [LOCAL, EVIL], K1, 200),
        (ApiSettings(token=TOKEN, allowed_hosts=("job",)), [AUTH, ("Host", "other")], K1, 421),
        (ApiSettings(cors_origins=(DASH,)), [("Origin", DASH)], K1, 200),
        (ApiSettings(), [("If-None-Match", '"a"'), ("If-None-Match", '"b"')], K1, 200),
        (ApiSettings(), [], "/j/op/state/missing", 404),
        (ApiSettings(), [], K1 + "?from=9&to=1", 400),
    ],
)  # fmt: skip
def test_what_the_middleware_would_refuse_or_change_takes_the_asgi_path(
    registry: Registry,
    settings: ApiSettings,
    headers: list[tuple[str, str]],
    path: str,
    status: int,
) -> None:
    with served(registry, settings) as (port, offered):
        r = _get(port, headers, path)
        assert r.status_code == status, r.text
        assert offered == [False]
        if settings.cors_origins:  # CORSMiddleware answered it: its header is there
            assert r.headers["access-control-allow-origin"] == DASH


@pytest.mark.parametrize(
    ("settings", "headers"),
    [
        (ApiSettings(), []),
        (ApiSettings(token=TOKEN), [AUTH]),
        (ApiSettings(token=TOKEN, host="0.0.0.0"), [AUTH, ("Host", "anything")]),
        (ApiSettings(allowed_hosts=("weir.internal",)), [("Host", "weir.internal:8000")]),
        (ApiSettings(cors_origins=(DASH,)), []),
    ],
)
def test_what_the_middleware_passes_unchanged_is_answered_directly(
    registry: Registry, settings: ApiSettings, headers: list[tuple[str, str]]
) -> None:
    with served(registry, settings) as (port, offered):
        r = _get(port, headers, K1)
        assert r.status_code == 200 and r.json()["key"] == "k-1"
        assert offered == [True]


def test_an_unguarded_api_has_no_direct_answers(registry: Registry) -> None:
    """Bound off loopback without a token, the API serves only /health (``HealthOnly``)."""
    settings = ApiSettings(host="0.0.0.0")
    assert create_app(registry, settings).state.direct is None
    with served(registry, ApiSettings()) as (port, _):
        assert _get(port, [], K1).status_code == 200  # the same lookup, guarded: answered


def test_a_leader_on_another_host_takes_every_lookup(registry: Registry) -> None:
    """``weir api`` forwards to the job's leader when its state is on another host
    (``LeaderForward``): while it names one, nothing is answered here."""
    direct = create_app(registry).state.direct
    request = ("/j/op/state/k-1", b"", [(b"host", b"127.0.0.1")])
    direct.follows = lambda: "http://10.0.0.2:8000"
    assert direct(*request) is None
    direct.follows = lambda: None
    answered = direct(*request)
    assert answered is not None and answered[0] == 200


def _responses(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` responses read off ``sock``: each one's head and body."""
    got, out = b"", list[tuple[bytes, bytes]]()
    while len(out) < count:
        head, sep, rest = got.partition(b"\r\n\r\n")
        if sep:
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) >= length:
                out.append((head, rest[:length]))
                got = rest[length:]
                continue
        part = sock.recv(65536)
        assert part, f"the server closed after {len(out)} responses"
        got += part
    return out


def _request(path: str, version: bytes = b"1.1") -> bytes:
    return b"GET %s HTTP/%s\r\nHost: 127.0.0.1\r\n\r\n" % (path.encode(), version)


def test_a_direct_answer_waits_for_the_pipelined_request_before_it(registry: Registry) -> None:
    """Three requests in one write: one for the FastAPI route (answered by a task, later),
    then two the direct answers take. The answers come back in the order asked."""
    with served(registry, ApiSettings()) as (port, offered):
        with socket.create_connection(("127.0.0.1", port), timeout=20.0) as sock:
            sock.sendall(
                _request("/j/op/state/k-1?timeout_ms=5000")
                + _request("/j/op/state/k-2")
                + _request("/j/op/state/k-3")
            )
            answers = _responses(sock, 3)
            # the connection stays open and answers directly once nothing is ahead
            sock.sendall(_request("/j/op/state/k-4"))
            answers += _responses(sock, 1)
    keys = [httpx.Response(200, content=body).json()["key"] for _, body in answers]
    assert keys == ["k-1", "k-2", "k-3", "k-4"]
    assert all(head.startswith(b"HTTP/1.1 200 ") for head, _ in answers)
    assert offered[-1] is True  # k-4: nothing ahead of it


def test_http_1_0_and_connection_close_take_the_asgi_path(registry: Registry) -> None:
    with served(registry, ApiSettings()) as (port, offered):
        for request in (
            _request("/j/op/state/k-1", b"1.0"),
            b"GET /j/op/state/k-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", port), timeout=20.0) as sock:
                sock.sendall(request)
                [(head, body)] = _responses(sock, 1)
                assert b"connection: close" in head.lower()
                assert sock.recv(1) == b""  # closed after the answer
                assert httpx.Response(200, content=body).json()["key"] == "k-1"
        assert offered == []  # never offered: the protocol keeps these
