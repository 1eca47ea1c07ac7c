"""Which routes change anything, and who may call them.

Every route the app serves is classified below, so a new route fails this test until someone
decides whether it reads or administers. Read routes never call the job manager's two mutating
operations; admin routes need the token when one is set, answer without one only on an API
bound to loopback, and never to a browser page of an origin outside ``--cors-origins``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from tests.support import LOCAL, FixedRuntime
from weir import Job, agg, sources, windows
from weir.api import ApiSettings, JobHandle, Registry, create_app
from weir.api.app import TOKEN_FREE_PATHS, admin_routes
from weir.api.routes.admin import ADMIN_TAG
from weir.base.errors import StateError
from weir.engine.runtime.view import BackfillEntry, SavepointResult
from weir.state.secondary import SecondaryReader

READ, ADMIN = "read", "admin"
ROUTES = {
    ("GET", "/"): READ,
    ("GET", "/health"): READ,
    ("GET", "/metrics"): READ,
    ("GET", "/openapi.json"): READ,
    ("GET", "/docs"): READ,
    ("GET", "/docs/oauth2-redirect"): READ,
    ("GET", "/redoc"): READ,
    ("GET", "/docs/static/{name}"): READ,
    ("GET", "/jobs"): READ,
    ("GET", "/jobs/{job}"): READ,
    ("GET", "/jobs/{job}/checkpoints"): READ,
    ("POST", "/jobs/{job}/backfills"): ADMIN,
    ("POST", "/jobs/{job}/savepoints"): ADMIN,
    ("GET", "/{job}/{op}/top"): READ,
    ("GET", "/{job}/{op}/broadcast"): READ,
    ("GET", "/{job}/{op}/windows/{start}"): READ,
    ("GET", "/{job}/{op}/state"): READ,
    ("GET", "/{job}/{op}/state/{key:path}"): READ,
    ("GET", "/{job}/{op}/state/{key:path}/stream"): READ,
    ("POST", "/{job}/{op}/lookup"): READ,  # a batch of point reads: POST only for its body
    ("POST", "/{job}/sql"): READ,  # a read-only SELECT: POST only for its body
    ("POST", "/auth/stream-token"): READ,  # signs a token; changes nothing
}
# a concrete request for each route (the stream never ends: it is read through its point twin)
REQUESTS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/jobs/{job}/backfills"): {
        "json": {"op": "op", "path": "/x", "min_end": 0, "max_end": 1}
    },
    ("POST", "/{job}/{op}/lookup"): {"json": {"keys": ["k"]}},
    ("POST", "/{job}/sql"): {"json": {"query": "SELECT * FROM op WHERE key = 'k'"}},
    ("GET", "/{job}/{op}/top"): {"params": {"by": "n"}},
}
TOKEN = "s3cret-token"


class RecordingRuntime(FixedRuntime):
    """A job manager that records the two operations that change anything."""

    def __init__(self, storage_root: Path) -> None:
        super().__init__(storage_root)
        self.calls: list[str] = []

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult:
        self.calls.append("savepoint")
        return {"id": 1, "path": "/chk-1"}

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry:
        self.calls.append("backfill")
        return {"op": req["op"], "min_end": 0, "max_end": 1, "windows": None, "time": 0}


def _client(tmp_path: Path, settings: ApiSettings) -> tuple[TestClient, RecordingRuntime]:
    job = Job("j")
    (
        job.source(sources.jsonl(tmp_path / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=1000))
        .aggregate("op", n=agg.count())
    )
    runtime = RecordingRuntime(tmp_path / "checkpoints")
    registry = Registry()
    reader = SecondaryReader(tmp_path / "no-db", tmp_path / "secondary")
    registry.add(JobHandle(job, runtime, [reader]))
    return TestClient(
        create_app(registry, settings), base_url=LOCAL, raise_server_exceptions=False
    ), runtime


def _send(client: TestClient, route: tuple[str, str], **kw: Any) -> Any:
    method, template = route
    url = template.replace("{job}", "j").replace("{op}", "op").replace("{key:path}", "k")
    url = url.replace("{start}", "0")
    return client.request(method, url, **{**REQUESTS.get(route, {}), **kw})


def _served() -> dict[tuple[str, str], list[str]]:
    app = create_app(Registry())
    found: dict[tuple[str, str], list[str]] = {}
    for ctx in iter_route_contexts(app.routes):
        for method in ctx.methods or ():
            if method != "HEAD":
                found[(method, ctx.path)] = list(getattr(ctx.route, "tags", None) or [])
    return found


def test_every_route_is_classified_and_only_admin_routes_are_tagged_admin() -> None:
    served = _served()
    assert set(served) == set(ROUTES), "classify new routes in ROUTES (read or admin)"
    for route, tags in served.items():
        assert (ADMIN_TAG in tags) == (ROUTES[route] == ADMIN), route
    guarded = [(pattern, m) for pattern, methods in admin_routes() for m in methods]
    assert len(guarded) == sum(kind == ADMIN for kind in ROUTES.values())
    for method, template in (r for r, kind in ROUTES.items() if kind == ADMIN):
        concrete = template.replace("{job}", "j")
        assert any(method in ms and p.match(concrete) for p, ms in admin_routes()), template
    for method, template in (r for r, kind in ROUTES.items() if kind == READ):
        assert method in ("GET", "POST")
        assert not any(method in ms and p.match(template) for p, ms in admin_routes())


def test_read_routes_change_nothing(tmp_path: Path) -> None:
    client, runtime = _client(tmp_path, ApiSettings(host="127.0.0.1"))
    for route, kind in ROUTES.items():
        if kind != READ or route[1].endswith("/stream"):
            continue
        r = _send(client, route)
        assert (
            r.status_code not in (401, 403, 405)
            and r.status_code < 500
            or (r.status_code == 503 and r.json()["error"]["code"] == "state_unavailable")
        ), (route, r.status_code, r.text)
    assert runtime.calls == []


def test_with_a_token_every_route_but_health_and_the_pages_needs_it(tmp_path: Path) -> None:
    client, runtime = _client(tmp_path, ApiSettings(token=TOKEN, host="0.0.0.0"))
    for route in ROUTES:
        if route[1].endswith("/stream"):
            continue
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = _send(client, route, headers=headers)
            # pages without data (the dashboard, the OpenAPI description): their requests, or
            # the calls they describe, need the token
            expected = 200 if route[1] in TOKEN_FREE_PATHS else 401
            assert r.status_code == expected, (route, headers, r.text)
        ok = _send(client, route, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code not in (401, 403), (route, ok.text)
    assert runtime.calls == ["backfill", "savepoint"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "weir.example"])
def test_without_a_token_an_api_off_loopback_serves_only_health(tmp_path: Path, host: str) -> None:
    client, runtime = _client(tmp_path, ApiSettings(host=host))
    for route in ROUTES:
        if route[1].endswith("/stream"):
            continue
        r = _send(client, route)
        if route == ("GET", "/health"):
            assert r.status_code == 200, r.text
            continue
        assert r.status_code == 403, (route, r.text)
        error = r.json()["error"]
        assert error["code"] == "needs_token"
        assert host in error["message"] and "WEIR_API_TOKEN" in error["message"]
    assert runtime.calls == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_without_a_token_admin_routes_answer_on_loopback(tmp_path: Path, host: str) -> None:
    client, runtime = _client(tmp_path, ApiSettings(host=host))
    for route in (r for r, kind in ROUTES.items() if kind == ADMIN):
        assert _send(client, route).status_code == 200, route
    assert runtime.calls == ["backfill", "savepoint"]


def test_admin_requests_from_a_page_of_another_origin_are_refused(tmp_path: Path) -> None:
    allowed = "https://dash.example"
    client, runtime = _client(tmp_path, ApiSettings(host="127.0.0.1", cors_origins=(allowed,)))
    for route in (r for r, kind in ROUTES.items() if kind == ADMIN):
        r = _send(client, route, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin_refused"
        assert "http://evil.example" in r.json()["error"]["message"]
        assert _send(client, route, headers={"Origin": allowed}).status_code == 200
    assert runtime.calls == ["backfill", "savepoint"]
    assert client.get("/jobs/j", headers={"Origin": "http://evil.example"}).status_code == 200


def test_no_admin_route_takes_a_path_but_the_backfill_directory(tmp_path: Path) -> None:
    """Savepoints are written under the job's checkpoint storage: no request chooses where."""
    spec = create_app(Registry()).openapi()
    savepoint = spec["paths"]["/jobs/{job}/savepoints"]["post"]
    assert {p["name"] for p in savepoint["parameters"]} == {"job", "timeout_ms"}
    assert "requestBody" not in savepoint
    backfill = spec["paths"]["/jobs/{job}/backfills"]["post"]
    assert {p["name"] for p in backfill["parameters"]} == {"job"}


class ExpiryRecorder(SecondaryReader):
    def __init__(self, primary: Path, secondary: Path) -> None:
        super().__init__(primary, secondary)
        self.expired = 0

    def expire(self) -> None:
        self.expired += 1
        super().expire()


def test_a_backfill_loaded_through_the_api_expires_its_readers(tmp_path: Path) -> None:
    """The caller of a live backfill reads its history next: every reader's next read must
    catch up past the load, not answer from within its freshness bound (CI: the first read
    after ``weir backfill --live`` returned missed the history). A refused backfill expires
    nothing."""
    client, runtime = _client(tmp_path, ApiSettings())
    handle = client.app.state.registry.jobs["j"]  # type: ignore[attr-defined]
    readers = [ExpiryRecorder(tmp_path / f"db-{i}", tmp_path / f"sec-{i}") for i in range(2)]
    handle.readers = readers
    route = ("POST", "/jobs/{job}/backfills")
    assert _send(client, route).status_code == 200
    assert runtime.calls == ["backfill"] and [r.expired for r in readers] == [1, 1]

    def refuse(req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry:
        raise StateError("a worker holds a window in the backfill's range")

    runtime.ingest_backfill = refuse  # type: ignore[method-assign]
    assert _send(client, route).status_code == 409
    assert [r.expired for r in readers] == [1, 1]
