"""The query API beyond the point lookup, against a real ``weir run``: batch lookup, ETag
polling, the bearer token, and CORS."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import WeirServer, event_lines, job_text, make_events, write_lines
from tests.support.reference import Spec, simulate

SPEC = Spec(bound=200, size=1_000, lateness=0)
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def finished_server(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> tuple[WeirServer, list[str]]:
    """One finished job for the module: its tests only read (lookups, listings, metrics with
    lower bounds), so they share it."""
    tmp_path = tmp_path_factory.mktemp("query-api")
    lines = event_lines(make_events(1_200, seed=8))
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness))
    server = module_weir_server(job, "--parallelism", "2", "--cors-origins", "http://dash.example")
    server.wait_finished()
    return server, lines


def test_batch_lookup_equals_point_lookups(finished_server: tuple[WeirServer, list[str]]) -> None:
    server, lines = finished_server
    client = server.client()
    keys = [*simulate(lines, SPEC).state_by_key(), "no-such-key"]
    r = client.post("/t1/imps/lookup", json={"keys": keys, "limit": 50})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["key"] for x in results] == keys
    for key, got in zip(keys, results, strict=True):
        point = client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"limit": 50})
        if point.status_code == 404:
            assert got["error"] == point.json()["error"]
        else:
            assert got == point.json()
    assert results[-1]["error"]["code"] == "key_not_found"


def test_batch_lookup_validates_its_body(finished_server: tuple[WeirServer, list[str]]) -> None:
    client = finished_server[0].client()
    r = client.post("/t1/imps/lookup", json={"keys": []})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = client.post("/t1/imps/lookup", json={"keys": ["a"], "from": 10, "to": 5})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_range"


def test_unchanged_polls_get_304(finished_server: tuple[WeirServer, list[str]]) -> None:
    client = finished_server[0].client()
    first = client.get("/t1/imps/state/ad-0")
    assert first.status_code == 200 and first.headers["etag"]
    again = client.get("/t1/imps/state/ad-0", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    other = client.get("/t1/imps/state/ad-0", params={"limit": 1},
                       headers={"If-None-Match": first.headers["etag"]})  # fmt: skip
    assert other.status_code == 200  # a different answer: a different ETag
    # freshness: when the state was read, outside the ETag (so it never breaks a 304)
    as_of = int(first.headers["x-weir-as-of"])
    assert abs(as_of - time.time() * 1000) < 60_000 and int(first.headers["age"]) >= 0
    assert int(again.headers["x-weir-as-of"]) >= as_of


def test_cors_preflight_names_the_allowed_origin(
    finished_server: tuple[WeirServer, list[str]],
) -> None:
    client = finished_server[0].client()
    r = client.options(
        "/t1/imps/state/ad-0",
        headers={"Origin": "http://dash.example", "Access-Control-Request-Method": "GET"},
    )
    assert r.headers.get("access-control-allow-origin") == "http://dash.example"
    r = client.get("/jobs", headers={"Origin": "http://elsewhere.example"})
    assert "access-control-allow-origin" not in r.headers


def test_token_protects_every_route_but_health_and_the_pages(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(200, seed=3)))
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=0, size=1_000, lateness=0))
    server = weir_server(job, "--parallelism", "1", env={"WEIR_API_TOKEN": TOKEN})
    with httpx.Client(base_url=server.base_url, timeout=10, trust_env=False) as anon:
        assert anon.get("/health").status_code == 200
        for path in ("/jobs", "/jobs/t1", "/t1/imps/state/ad-0", "/t1/imps/state/ad-0/stream"):
            r = anon.get(path)
            assert r.status_code == 401, path
            assert r.json()["error"]["code"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
        # pages without data, which a browser opens without headers: the dashboard, and the
        # OpenAPI description whose /docs has Authorize for the bearer scheme
        assert anon.get("/").status_code == 200 and anon.get("/docs").status_code == 200
        spec = anon.get("/openapi.json").json()
        assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert spec["paths"]["/jobs"]["get"]["security"] == [{"bearer": []}]
        assert "security" not in spec["paths"]["/health"]["get"]
        wrong = anon.get("/jobs", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    with httpx.Client(base_url=server.base_url, timeout=10, trust_env=False,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as auth:  # fmt: skip
        assert auth.get("/jobs").status_code == 200
    assert TOKEN not in server.stderr()


@pytest.mark.parametrize("page", [1, 3, 100])
def test_key_listing_pages_visit_every_key_once(
    finished_server: tuple[WeirServer, list[str]], page: int
) -> None:
    server, lines = finished_server
    client = server.client()
    expected = set(simulate(lines, SPEC).state_by_key())
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        params: dict[str, str | int] = {"limit": page}
        if cursor:
            params["cursor"] = cursor
        body = client.get("/t1/imps/state", params=params).json()
        assert len(body["keys"]) <= page
        seen.extend(body["keys"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), "a key was listed twice"
    assert set(seen) == expected


def test_key_listing_prefix_and_bad_cursor(finished_server: tuple[WeirServer, list[str]]) -> None:
    client = finished_server[0].client()
    keys = client.get("/t1/imps/state", params={"prefix": "ad-", "limit": 1000}).json()["keys"]
    assert keys and all(k.startswith("ad-") for k in keys)
    assert len(keys) == 5  # ad-0 .. ad-4 in the generated input
    r = client.get("/t1/imps/state", params={"cursor": "not-a-cursor"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_cursor"


def test_metrics_expose_pipeline_counters_and_query_latency(
    finished_server: tuple[WeirServer, list[str]],
) -> None:
    server, lines = finished_server
    client = server.client()
    for key in ("ad-0", "ad-1", "missing"):
        client.get(f"/t1/imps/state/{key}")
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in text_string_to_metric_families(r.text)}

    def value(family: str, **labels: str) -> float:
        found = [s.value for s in families[family].samples if s.labels == labels]
        assert len(found) == 1, (family, labels, families[family].samples)
        return found[0]

    ref = simulate(lines, SPEC)
    assert families["weir_operator_records_in"].type == "counter"
    assert value("weir_operator_records_in", job="t1", op="imps") == ref.records_to_op
    assert value("weir_late_records", job="t1", op="imps") == len(ref.late)
    records_in = [s for s in families["weir_records_in"].samples if s.name.endswith("_total")]
    assert {s.labels["worker"] for s in records_in} == {"0", "1"}
    assert sum(s.value for s in records_in) == len(lines)
    assert value("weir_job_state", job="t1", state="finished") == 1
    assert value("weir_job_state", job="t1", state="running") == 0
    # the job is finished: its watermark is the end of input, which is no time to expose
    assert families["weir_watermark_timestamp_seconds"].samples == []

    latency = families["weir_http_request_duration_seconds"]
    assert latency.type == "histogram"
    route = {"method": "GET", "route": "/{job}/{op}/state/{key:path}"}
    responses = families["weir_http_responses"]
    ok = [s.value for s in responses.samples if s.labels == {**route, "status": "200"}]
    missing = [s.value for s in responses.samples if s.labels == {**route, "status": "404"}]
    assert ok[0] >= 2 and missing[0] >= 1
    ours = [s for s in latency.samples if {k: s.labels[k] for k in route} == route]
    buckets = [s for s in ours if s.name.endswith("_bucket")]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts), "buckets are cumulative"
    assert buckets[-1].labels["le"] == "+Inf"
    count = next(s.value for s in ours if s.name.endswith("_count"))
    total = next(s.value for s in ours if s.name.endswith("_sum"))
    assert count == buckets[-1].value >= 3
    assert 0 < total / count < 1.0, "latency in seconds: a lookup takes milliseconds"
