"""``api.fastpath``: which point lookups it answers itself, and that its answers (bodies,
headers, errors, 304s, metrics) are the FastAPI route's, over uvicorn on loopback and a real
RocksDB read through a secondary instance: ``PointLookup`` under uvicorn's own protocol, and
``DirectAnswer`` under weir's (``app.http_guard``), which answers below ASGI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.security._http import direct_protocol, serve, sliding_job, write_keys
from tests.support import FixedRuntime
from weir.api import JobHandle, Registry, create_app
from weir.api.fastpath import simple_bounds
from weir.api.routes.state import Bounds
from weir.state.secondary import SecondaryReader

POINT_ROUTE = "/{job}/{op}/state/{key:path}"


@pytest.mark.parametrize(
    ("query", "bounds"),
    [
        (b"", Bounds()),
        (b"limit=5", Bounds(limit=5)),
        (b"from=-3&to=4000&limit=10000", Bounds(-3, 4000, 10_000)),
        (b"consistency=live&unknown=x", Bounds()),
        (b"limit=%35", Bounds(limit=5)),  # percent-encoded, as Starlette decodes it
    ],
)
def test_plain_queries_take_the_fast_path(query: bytes, bounds: Bounds) -> None:
    assert simple_bounds(query) == bounds


@pytest.mark.parametrize(
    "query",
    [
        b"limit=0",  # FastAPI's 422
        b"limit=10001",
        b"limit=",
        b"limit=+5",
        b"limit=5.0",
        b"limit=1&limit=2",
        b"from=1e3",
        b"to=x",
        b"consistency=committed",
        b"consistency=bogus",
        b"min_watermark=5",
        b"timeout_ms=10",
    ],
)
def test_other_queries_go_to_the_route(query: bytes) -> None:
    assert simple_bounds(query) is None


class Client(httpx.Client):
    """A client of the app, and what its direct answers did (``None``: served without them):
    for each request offered, whether ``DirectAnswer`` answered it."""

    direct: list[bool] | None = None


@pytest.fixture(scope="module", params=["asgi", "direct"])
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Client]:
    tmp: Path = tmp_path_factory.mktemp("fastpath")
    job = sliding_job(tmp)
    write_keys(tmp / "db", job, [f"k-{i}" for i in range(100)] + ["a/b"], frozenset({"k-3"}))
    reader = SecondaryReader(tmp / "db", tmp / "secondary")
    registry = Registry()
    registry.add(JobHandle(job, FixedRuntime(tmp / "chk"), [reader]))
    app = create_app(registry)
    config: dict[str, object] = {}
    offered: list[bool] = []
    if request.param == "direct":
        config["http"], offered = direct_protocol(app)
    with (
        serve(app, **config) as served,
        Client(base_url=served.base_url, timeout=30.0, trust_env=False) as c,
    ):
        c.direct = offered if request.param == "direct" else None
        yield c


def _answered_directly(client: Client) -> bool | None:
    """Whether the client's last request was answered by ``DirectAnswer`` (``None``: the
    server has no direct answers)."""
    return None if client.direct is None else client.direct[-1]


def _steady(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k not in ("date", "x-weir-as-of", "age")}


def _via_route(path: str) -> str:
    """The same request, sent past the fast path: ``timeout_ms`` without a bound changes
    nothing in the answer, but only the FastAPI route takes it."""
    return path + ("&" if "?" in path else "?") + "timeout_ms=5000"


@pytest.mark.parametrize(
    "path",
    [
        "/j/op/state/k-1",
        "/j/op/state/k-1?limit=1",
        "/j/op/state/k-3?from=0&to=5000",
        "/j/op/state/a/b",
        "/j/op/state/nope",
        "/x/op/state/k-1",
        "/j/nop/state/k-1",
        "/j/op/state/k-1?from=10&to=5",
        "/j/op/state/" + "x" * 5000,
    ],
)
def test_fast_answers_equal_the_routes(client: Client, path: str) -> None:
    fast = client.get(path)
    # direct answers are found keys' only; a refusal or a 404 is the ASGI path's
    assert _answered_directly(client) in (None, fast.status_code == 200)
    slow = client.get(_via_route(path))
    assert simple_bounds(httpx.URL(path).query) is not None
    assert (fast.status_code, fast.content) == (slow.status_code, slow.content)
    # the same headers, in the same order; the time ones may differ between two reads
    assert list(fast.headers.keys()) == list(slow.headers.keys())
    assert _steady(fast.headers) == _steady(slow.headers)
    assert fast.status_code in (200, 400, 404), fast.text


def test_a_poll_with_the_etag_gets_304_on_both_paths(client: Client) -> None:
    etag = client.get("/j/op/state/k-2").headers["etag"]
    for path in ("/j/op/state/k-2", _via_route("/j/op/state/k-2")):
        r = client.get(path, headers={"If-None-Match": etag})
        assert r.status_code == 304 and r.content == b"" and r.headers["etag"] == etag


def _responses(client: Client, status: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for s in family.samples:
            if s.name == "weir_http_responses_total" and s.labels == {
                "method": "GET",
                "route": POINT_ROUTE,
                "status": status,
            }:
                return s.value
    return 0.0


def test_fast_answers_are_counted_under_the_route_template(client: Client) -> None:
    ok, missing = _responses(client, "200"), _responses(client, "404")
    for i in range(5):
        assert client.get(f"/j/op/state/k-{10 + i}").status_code == 200
    assert client.get("/j/op/state/nope").status_code == 404
    assert _responses(client, "200") == ok + 5
    assert _responses(client, "404") == missing + 1
