"""The query API beyond the point lookup, against a real ``weir run``: batch lookup, ETag
polling, the bearer token, and CORS."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import orjson
import pytest

from tests.reference import Spec, simulate
from tests.support import WeirServer, event_lines, job_text, make_events, write_lines

SPEC = Spec(bound=200, size=1_000, lateness=0)
TOKEN = "s3cret-token"


@pytest.fixture
def finished_server(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> tuple[WeirServer, list[str]]:
    lines = event_lines(make_events(1_200, seed=8))
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness))
    server = weir_server(job, "--parallelism", "2", "--cors-origins", "http://dash.example")
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


def test_token_protects_every_route_but_health(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", event_lines(make_events(200, seed=3)))
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=0, size=1_000, lateness=0))
    server = weir_server(job, "--parallelism", "1", env={"WEIR_API_TOKEN": TOKEN})
    with httpx.Client(base_url=server.base_url, timeout=10, trust_env=False) as anon:
        assert anon.get("/health").status_code == 200
        for path in ("/jobs", "/jobs/t1", "/t1/imps/state/ad-0", "/", "/openapi.json"):
            r = anon.get(path)
            assert r.status_code == 401, path
            assert r.json()["error"]["code"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
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
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    ref = simulate(lines, SPEC)
    assert samples['weir_operator_records_in_total{job="t1",op="imps"}'] == ref.records_to_op
    assert samples['weir_late_records_total{job="t1",op="imps"}'] == len(ref.late)
    route = 'route="/{job}/{op}/state/{key:path}"'
    assert samples[f'weir_http_responses_total{{method="GET",{route},status="200"}}'] >= 2
    assert samples[f'weir_http_responses_total{{method="GET",{route},status="404"}}'] >= 1
    count = samples[f'weir_http_request_duration_seconds_count{{method="GET",{route}}}']
    inf = samples[f'weir_http_request_duration_seconds_bucket{{method="GET",{route},le="+Inf"}}']
    assert count == inf >= 3
    assert sum(v for k, v in samples.items() if k.startswith("weir_records_in_total")) == len(lines)


LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=500, ids=3, skew=0), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=60_000))
    .aggregate("counts", n=agg.count())
)
"""


def test_sse_stream_delivers_successive_updates(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE_JOB)
    server = weir_server(job, "--parallelism", "2")
    counts: list[int] = []
    with httpx.Client(base_url=server.base_url, timeout=20, trust_env=False) as client:
        with client.stream(
            "GET", "/live/counts/state/ad-1/stream", params={"interval_ms": 100}
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                body = orjson.loads(line[len("data: ") :])
                if "windows" in body:
                    counts.append(sum(w["n"] for w in body["windows"]))
                if len(counts) >= 3:
                    break
    assert len(counts) >= 3
    assert counts == sorted(counts) and counts[-1] > counts[0]  # successive, growing updates
