"""``GET /{job}/{op}/state/{key}/stream`` against real ``weir run`` servers (uvicorn on loopback)
read with httpx: successive answers of a live job, event ids equal to the point lookup's ETag, a
``retry``, a resumed stream that waits for a change and is kept alive meanwhile, 404s before
the stream starts, and streams whose clients went are closed on the server too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import WeirServer, event_lines, job_text, make_events, wait_until, write_lines

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
KEEPALIVE_S = 15.0  # FastAPI's idle interval before it sends a comment


@dataclass
class Frame:
    """One SSE frame: its fields (``data``, ``id``, ``retry``) and its comment lines."""

    fields: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)


def frames(response: httpx.Response) -> Iterator[Frame]:
    frame = Frame()
    for line in response.iter_lines():
        if not line:
            if frame.fields or frame.comments:
                yield frame
            frame = Frame()
        elif line.startswith(":"):
            frame.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            frame.fields[name] = value.removeprefix(" ")


def open_streams(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    found = {f.name: f for f in text_string_to_metric_families(text)}
    return found["weir_open_sse_streams"].samples[0].value


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> WeirServer:
    root = tmp_path_factory.mktemp("sse")
    src = write_lines(root / "in.jsonl", event_lines(make_events(600, seed=3)))
    job = root / "job.py"
    job.write_text(job_text(src, bound=200, size=1_000, lateness=0))
    server = module_weir_server(job)
    server.wait_finished()
    return server


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> WeirServer:
    job = tmp_path_factory.mktemp("sse-live") / "live.py"
    job.write_text(LIVE_JOB)
    return module_weir_server(job, "--parallelism", "2")


def test_a_live_key_streams_successive_answers(live: WeirServer) -> None:
    counts: list[int] = []
    ids: list[str] = []
    with httpx.Client(base_url=live.base_url, timeout=20, trust_env=False) as client:
        url = "/live/counts/state/ad-1/stream"
        with client.stream("GET", url, params={"interval_ms": 100}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            for frame in frames(r):
                body = orjson.loads(frame.fields["data"])
                if "windows" in body:
                    counts.append(sum(w["n"] for w in body["windows"]))
                    ids.append(frame.fields["id"])
                if len(counts) >= 3:
                    break
    assert counts == sorted(counts) and counts[-1] > counts[0]  # successive, growing updates
    assert len(set(ids)) == len(ids), "each answer has its own id"


def test_an_events_id_is_its_answers_etag(finished: WeirServer) -> None:
    client = finished.client()
    point = client.get("/t1/imps/state/ad-0", params={"limit": 10})
    assert point.status_code == 200
    with client.stream("GET", "/t1/imps/state/ad-0/stream") as r:
        assert r.status_code == 200
        assert r.headers["cache-control"] == "no-cache"
        first = next(frames(r))
    assert first.fields["id"] == point.headers["etag"].strip('"')
    assert first.fields["retry"] == "2000"
    assert orjson.loads(first.fields["data"]) == point.json()


def test_a_stream_resumed_at_the_current_answer_waits_and_is_kept_alive(
    finished: WeirServer,
) -> None:
    client = httpx.Client(base_url=finished.base_url, timeout=KEEPALIVE_S + 15, trust_env=False)
    etag = client.get("/t1/imps/state/ad-0", params={"limit": 10}).headers["etag"].strip('"')
    with client.stream("GET", "/t1/imps/state/ad-0/stream", headers={"Last-Event-ID": etag}) as r:
        started = time.monotonic()
        stream = frames(r)
        hello = next(stream)
        assert hello.fields == {"retry": "2000"}, "no data: the client has this answer"
        assert hello.comments == [f"no change since event {etag}"]
        ping = next(stream)
        waited = time.monotonic() - started
    assert ping.fields == {} and ping.comments == ["ping"]
    assert waited >= KEEPALIVE_S - 1, "nothing came between the resume and the keep-alive"
    # an id that is not the current answer's: the answer comes at once
    with client.stream("GET", "/t1/imps/state/ad-0/stream", headers={"Last-Event-ID": "x"}) as r:
        assert next(frames(r)).fields["id"] == etag
    client.close()


def test_unknown_job_or_operator_is_a_404_and_an_unknown_key_an_error_event(
    finished: WeirServer,
) -> None:
    client = finished.client()
    for path, code in (
        ("/nope/imps/state/ad-0/stream", "job_not_found"),
        ("/t1/nope/state/ad-0/stream", "operator_not_found"),
    ):
        r = client.get(path)
        assert r.status_code == 404 and r.json()["error"]["code"] == code, r.text
    with client.stream("GET", "/t1/imps/state/no-such-key/stream") as r:
        assert r.status_code == 200
        first = next(frames(r))
    # a typed frame: an EventSource hands it to its "error" listeners, as the docs say
    assert first.fields["event"] == "error", first
    assert orjson.loads(first.fields["data"])["error"]["code"] == "key_not_found"
    with client.stream("GET", "/t1/imps/state/ad-0/stream") as r:
        frame = next(frames(r))
    assert "event" not in frame.fields and "windows" in orjson.loads(frame.fields["data"])


def test_streams_whose_clients_went_are_closed_on_the_server(live: WeirServer) -> None:
    scraper = live.client()
    wait_until(lambda: scraper.get("/jobs/live").json()["state"] == "running", 30.0)
    wait_until(lambda: open_streams(scraper) == 0, 10.0, what="no stream open before the test")
    clients = [httpx.Client(base_url=live.base_url, timeout=20, trust_env=False) for _ in range(3)]
    readers = []  # kept: dropping a reader would close its connection before the test does
    for c in clients:
        r = c.send(c.build_request("GET", "/live/counts/state/ad-2/stream"), stream=True)
        assert r.status_code == 200
        reader = frames(r)
        assert "data" in next(reader).fields
        readers.append(reader)
    assert open_streams(scraper) == 3
    for c in clients:
        c.close()  # the connections go; the server learns it from the socket alone
    wait_until(lambda: open_streams(scraper) == 0, 10.0, what="the server to close the streams")
    with scraper.stream("GET", "/live/counts/state/ad-2/stream") as r:  # and serves new ones
        assert "windows" in orjson.loads(next(frames(r)).fields["data"])
