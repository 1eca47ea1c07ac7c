"""``weir.client`` against real ``weir run`` and ``weir api`` processes on loopback, with a
token: every method's answer parsed into the API's models, the API's errors as exceptions,
``AsyncClient``, a stream token opening a stream, and ``stream()`` resuming with
``Last-Event-ID`` after the ``weir api`` process is killed and started again on its port."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

import weir.api.client
from tests.support import WeirServer, wait_until
from weir.api.models import StateAnswer
from weir.client import (
    AsyncClient,
    BadRequest,
    Client,
    LookupMiss,
    NotFound,
    Reconnect,
    TransportError,
    Unauthorized,
    to_pandas,
)

TOKEN = "client-test-token"
ENV = {"WEIR_API_TOKEN": TOKEN}
JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=400, ids=5, skew=0), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=500))
    .aggregate("counts", n=agg.count(), total=agg.sum("value"))
)
"""
KEYS = {f"ad-{i}" for i in range(5)}


def _job(root: Path) -> Path:
    path = root / "live.py"
    path.write_text(JOB)
    return path


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> WeirServer:
    job = _job(tmp_path_factory.mktemp("client"))
    flags = ("--parallelism", "2", "--checkpoint-interval-ms", "300")
    started = module_weir_server(job, *flags, env=ENV)
    with Client(started.base_url, token=TOKEN, trust_env=False) as client:
        wait_until(
            lambda: _ready(client), 30.0, what="a checkpoint, all five keys and a fired window"
        )
    return started


def _ready(client: Client) -> bool:
    try:
        return (
            bool(client.checkpoints("live").checkpoints)
            and set(client.keys("live", "counts")) == KEYS
            and bool(client.top("live", "counts", "n").keys)
        )
    except NotFound:  # no window has fired yet
        return False


def test_every_method_answers_in_the_apis_models(server: WeirServer) -> None:
    with Client(server.base_url, token=TOKEN, trust_env=False) as client:
        assert client.health().status == "ok"
        assert [j.name for j in client.jobs().jobs] == ["live"]
        detail = client.job("live")
        assert detail.parallelism == 2 and detail.operators[0]["name"] == "counts"
        assert client.checkpoints("live").checkpoints[0].job == "live"
        saved = client.savepoint("live")
        assert any(c.id == saved.id and c.savepoint for c in client.checkpoints("live").checkpoints)
        answer = client.state("live", "counts", "ad-0", limit=2)
        assert isinstance(answer, StateAnswer) and 1 <= len(answer.windows) <= 2
        first = answer.windows[0].start
        ranged = client.state("live", "counts", "ad-0", start=first, to=first)
        assert [w.start for w in ranged.windows] == [first]
        committed = client.state("live", "counts", "ad-0", consistency="committed")
        assert committed.consistency == "committed" and committed.checkpoint is not None
        assert set(client.keys("live", "counts", page_size=2)) == KEYS
        assert set(client.keys("live", "counts", prefix="ad-3")) == {"ad-3"}
        found = client.lookup("live", "counts", ["ad-1", "nope"], limit=1)
        assert isinstance(found[0], StateAnswer) and found[0].key == "ad-1"
        assert isinstance(found[1], LookupMiss) and found[1].error.code == "key_not_found"
        top = client.top("live", "counts", "n", n=3)
        assert len(top.keys) == 3 and top.keys[0].key in KEYS
        event = next(client.stream("live", "counts", "ad-2", limit=1))
        assert event.answer is not None and event.answer.key == "ad-2" and event.id
        missing = next(client.stream("live", "counts", "no-such-key", limit=1))
        assert missing.answer is None and missing.error is not None
        assert missing.error.code == "key_not_found"
        assert (
            top.window.start
            == client.top("live", "counts", "n", window=top.window.start).window.start
        )
        frame = to_pandas(answer)
        assert {"key", "start", "end", "n", "total", "final"} <= set(frame.columns)
        assert list(frame["key"]) == ["ad-0"] * len(answer.windows)


def test_the_apis_errors_are_exceptions(server: WeirServer) -> None:
    with Client(server.base_url, token=TOKEN, trust_env=False) as client:
        for call, code in (
            (lambda: client.job("nope"), "job_not_found"),
            (lambda: client.state("live", "nope", "ad-0"), "operator_not_found"),
            (lambda: client.state("live", "counts", "no-such-key"), "key_not_found"),
        ):
            with pytest.raises(NotFound) as caught:
                call()
            assert caught.value.code == code and caught.value.status == 404
        with pytest.raises(BadRequest, match="is before from=9") as caught:
            client.state("live", "counts", "ad-0", start=9, to=1)
        assert caught.value.code == "invalid_range"
        with pytest.raises(BadRequest, match="limit") as caught:
            client.state("live", "counts", "ad-0", limit=0)
        assert caught.value.status == 422
    with Client(server.base_url, token="wrong", trust_env=False) as client:
        assert client.health().status == "ok"  # /health is open
        with pytest.raises(Unauthorized, match="WEIR_API_TOKEN"):
            client.jobs()


def test_the_async_client(server: WeirServer) -> None:
    async def main() -> None:
        async with AsyncClient(server.base_url, token=TOKEN, trust_env=False) as client:
            assert (await client.health()).status == "ok"
            assert {k async for k in client.keys("live", "counts", page_size=3)} == KEYS
            answer = await client.state("live", "counts", "ad-4")
            assert answer.key == "ad-4" and answer.windows
            found = await client.lookup("live", "counts", ["ad-4"])
            assert isinstance(found[0], StateAnswer)
            assert (await client.top("live", "counts", "total")).by == "total"
            async for event in client.stream("live", "counts", "ad-4", limit=1):
                assert event.answer is not None and event.answer.key == "ad-4"
                break
            with pytest.raises(NotFound):
                await client.job("nope")

    asyncio.run(main())


def test_a_stream_token_opens_a_stream_without_the_header(server: WeirServer) -> None:
    with Client(server.base_url, token=TOKEN, trust_env=False) as client:
        token = client.stream_token("live", ttl_s=30)["token"]
    path = "/live/counts/state/ad-0/stream"
    with httpx.Client(base_url=server.base_url, timeout=10, trust_env=False) as http:
        assert http.get(path).status_code == 401
        with http.stream("GET", path, params={"access_token": token}) as r:
            assert r.status_code == 200
            assert any(line.startswith("data: {") for line in r.iter_lines())


def _example(text: str) -> str:
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found, "no ```python block"
    return found.group(1)


def test_the_documented_example_runs(server: WeirServer) -> None:
    """The example in ``weir.api.client``'s docstring, which the README's "The Python client"
    section shows too (the same text, once the README has that section)."""
    code = _example(weir.api.client.__doc__ or "")
    readme = Path(__file__).parents[2] / "README.md"
    section = re.search(r"### The Python client\n(.*?)\n#", readme.read_text(), re.S)
    if section:
        assert _example(section.group(1)) == code, "README's example differs from the docstring's"
    env = {**os.environ, "WEIR_URL": server.base_url, "WEIR_API_TOKEN": TOKEN, "NO_PROXY": "*"}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "ok" and "key_not_found" in lines
    assert str(sorted(KEYS)) in lines and re.fullmatch(r"\d+", lines[-1]), run.stdout


def test_stream_resumes_after_the_api_process_is_killed_and_restarted(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = _job(tmp_path)
    state = tmp_path / "state"
    weir_server(job, "--no-api", "--parallelism", "1", state_dir=state, env=ENV)
    api = weir_server(job, command="api", state_dir=state, env=ENV)
    patient = Reconnect(attempts=100, total_s=60, max_delay_s=0.2)
    with Client(api.base_url, token=TOKEN, reconnect=patient, trust_env=False) as client:
        wait_until(lambda: _has_state(client), 30.0, what="ad-0 to have state")
        events = client.stream("live", "counts", "ad-0", interval_ms=100)
        before = next(events)
        assert before.answer is not None
        os.kill(api.proc.pid, signal.SIGKILL)
        api.proc.wait(10)
        port = str(urlsplit(api.base_url).port)
        again = weir_server(job, "--api-port", port, command="api", state_dir=state, env=ENV)
        assert again.base_url == api.base_url
        after = next(events)  # the same iterator: it reconnected on its own
        assert after.answer is not None and after.id != before.id
        assert (after.answer.watermark or 0) >= (before.answer.watermark or 0)
        events.close()
    impatient = Reconnect(attempts=2, total_s=10, max_delay_s=0.1)
    with Client(again.base_url, token=TOKEN, reconnect=impatient, trust_env=False) as client:
        events = client.stream("live", "counts", "ad-0")
        assert next(events).answer is not None
        os.kill(again.proc.pid, signal.SIGKILL)  # SIGTERM would wait for this open stream
        again.proc.wait(10)
        t0 = time.monotonic()
        with pytest.raises(TransportError, match="gave up after 2 reconnects"):
            for _ in events:
                pass
        assert time.monotonic() - t0 < 10


def _has_state(client: Client) -> bool:
    try:
        return bool(client.state("live", "counts", "ad-0").windows)
    except NotFound:
        return False
