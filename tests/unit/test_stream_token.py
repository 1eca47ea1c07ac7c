"""Stream tokens (``POST /auth/stream-token``, ``?access_token=`` on the ``/stream`` routes)
against the real app served by uvicorn on loopback: a good token opens its job's streams and
nothing else; expired, forged and wrong-scope tokens are 401 JSON naming the fix; and the token
never reaches uvicorn's access log."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import FixedRuntime
from tests.support.http_stub import served
from weir import Job, agg, sources, windows
from weir.api import ApiSettings, JobHandle, Registry, create_app
from weir.api.streamtoken import StreamKeys
from weir.client import BadRequest, Client, Unauthorized
from weir.state.secondary import SecondaryReader

TOKEN = "s3cret-token"
STREAM = "/j/op/state/k/stream"


def _registry(tmp: Path, name: str = "j") -> Registry:
    job = Job(name)
    (
        job.source(sources.jsonl(tmp / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=1000))
        .aggregate("op", n=agg.count())
    )
    registry = Registry()
    reader = SecondaryReader(tmp / f"no-db-{name}", tmp / f"secondary-{name}")
    registry.add(JobHandle(job, FixedRuntime(tmp / f"checkpoints-{name}"), [reader]))
    return registry


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    registry = _registry(tmp_path_factory.mktemp("streamtoken"))
    app = create_app(registry, ApiSettings(token=TOKEN))
    # the access log on, as an operator running at INFO would have it
    with served(app, log_level="info", access_log=True) as base:
        yield base


def _open(url: str, path: str, token: str) -> tuple[int, str, dict[str, object]]:
    """Status, content type and (for an error) body of a stream opened with ``token``."""
    with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
        with http.stream("GET", path, params={"access_token": token}) as r:
            kind = r.headers.get("content-type", "")
            if r.status_code == 200:
                next(r.iter_lines())  # the stream answers; one line is enough
                return 200, kind, {}
            r.read()
            return r.status_code, kind, r.json()


def test_a_stream_token_opens_its_jobs_streams_and_nothing_else(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Client(url, token=TOKEN, trust_env=False) as client:
        everywhere = client.stream_token()
        only_j = client.stream_token("j", ttl_s=60)
    assert only_j["expires_at"] / 1000 - time.time() == pytest.approx(60, abs=5)
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        for token in (everywhere["token"], only_j["token"]):
            status, kind, _ = _open(url, STREAM, str(token))
            assert status == 200 and kind.startswith("text/event-stream")
    logged = " ".join(r.getMessage() for r in caplog.records if r.name == "uvicorn.access")
    assert STREAM in logged  # the access log saw the requests ...
    assert "access_token" not in logged and str(only_j["token"]) not in logged  # ... not the token
    with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
        r = http.get("/jobs", params={"access_token": only_j["token"]})
    assert r.status_code == 401 and "/stream routes only" in r.json()["error"]["message"]


def test_expired_forged_and_wrong_scope_tokens_are_refused(url: str) -> None:
    keys = StreamKeys.from_api_token(TOKEN)
    expired, _ = keys.issue("j", 60, now=time.time() - 120)
    other, _ = keys.issue("other", 60)
    good, _ = keys.issue("j", 60)
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    elsewhere, _ = StreamKeys.from_api_token("another API's token").issue("j", 60)
    cases = {
        expired: ("stream_token_expired", "expired at"),
        other: ("stream_token_scope", "streams under '/other/' only"),
        forged: ("invalid_stream_token", "not a stream token this API gave out"),
        elsewhere: ("invalid_stream_token", "not a stream token this API gave out"),
        "garbage": ("invalid_stream_token", "POST /auth/stream-token"),
    }
    for token, (code, words) in cases.items():
        status, kind, body = _open(url, STREAM, token)
        assert (status, kind) == (401, "application/json"), token
        assert body["error"]["code"] == code, body
        assert words in str(body["error"]["message"]) and token not in str(body), token


def test_a_stream_token_needs_the_api_token_to_get(url: str, tmp_path: Path) -> None:
    with Client(url, token="wrong", trust_env=False) as client:
        with pytest.raises(Unauthorized, match="Authorization: Bearer"):
            client.stream_token()
    open_api = create_app(_registry(tmp_path), ApiSettings())
    with served(open_api) as base, Client(base, trust_env=False) as client:
        with pytest.raises(BadRequest, match="without WEIR_API_TOKEN") as caught:
            client.stream_token()
        assert caught.value.code == "no_token_needed"
