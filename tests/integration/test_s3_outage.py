"""The object store goes away for 30 s while a job with S3 checkpoints runs (the SeaweedFS
server is stopped, then started again with the same data and port).

Meanwhile checkpoints fail and ``/health`` says degraded with the reason, records keep flowing
(records_in and the watermark move), and committed reads answer at once from the view already
downloaded. Once the store is back the next checkpoint succeeds, ``/health`` is ok again, and
the finished job's output equals the brute-force model.

Committed reads (``consistency=committed``) from S3 never wait for a download: the first may
answer 503 with ``Retry-After`` while the view is fetched in the background, every request
answers within a second, and once the final checkpoint is downloaded they serve the model's
windows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.integration.test_checkpoints import SPEC, _assert_matches, _expected
from tests.support import WeirServer, event_lines, make_events, wait_until, write_lines
from tests.support.servers import S3Place

OUTAGE_S = 30.0
# ~9 ms a record: the bounded input lasts ~45 s, longer than the outage and its margins
SLOW_IMPRESSIONS = (
    (
        "filter",
        "lambda e: __import__('time').sleep(0.009) is None and e['event'] == 'impression'",
    ),
)
N_EVENTS = 5_000


def _timed_get(client: httpx.Client, url: str) -> httpx.Response:
    began = time.monotonic()
    r = client.get(url)
    took = time.monotonic() - began
    assert took < 1.0, f"GET {url} took {took:.2f} s: a read must never wait for the store"
    return r


def _committed(client: httpx.Client, key: str) -> httpx.Response:
    r = _timed_get(client, f"/t1/imps/state/{quote(key, safe='')}?consistency=committed")
    if r.status_code == 503:
        assert r.json()["error"]["code"] == "state_unavailable", r.text
        assert int(r.headers["Retry-After"]) >= 1, r.headers
    else:
        assert r.status_code == 200, r.text
    return r


def _job_body(client: httpx.Client) -> dict[str, Any]:
    r = _timed_get(client, "/jobs/t1")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["state"] in ("starting", "running"), body
    return body


@pytest.mark.timeout(240)
def test_an_object_store_outage_fails_checkpoints_only_and_processing_goes_on(
    s3: S3Place,
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    lines = event_lines(make_events(N_EVENTS, seed=31))
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = write_job(
        src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=SLOW_IMPRESSIONS
    )
    ref = _expected(lines)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    server = weir_server(
        job, "--sink", f"file://{out}", "--parallelism", "2", "--batch-size", "64",
        "--checkpoint-interval-ms", "500", "--checkpoint-dir", s3.url, "--lease-ms", "180000",
        state_dir=state, env=s3.env,
    )  # fmt: skip
    # the lease (renewed every 45 s, valid 144 s after a renewal) outlasts the outage and the
    # server's restart: with the default 60 s a job manager rides out only ~33 s, then stops
    c = server.client()
    wait_until(lambda: _job_body(c)["last_checkpoint"], 30.0, what="a first checkpoint")
    # the first committed read: 503 while the view downloads; then the checkpoint's windows
    first = _committed(c, "ad-0")

    def downloaded() -> dict[str, Any] | None:
        r = _committed(c, "ad-0")
        return r.json() if r.status_code == 200 else None

    seen = wait_until(downloaded, 15.0, what="the committed view")
    assert seen["consistency"] == "committed" and seen["checkpoint"] >= 1
    # nothing was downloaded before the first committed read asked for it
    assert first.status_code == 503, first.text
    assert "is still being downloaded from s3://" in first.json()["error"]["message"]

    before = _job_body(c)
    s3.server.stop()
    began = time.monotonic()
    during: list[dict[str, Any]] = []
    health: list[dict[str, Any]] = []
    try:
        while time.monotonic() - began < OUTAGE_S:
            during.append(_job_body(c))
            health.append(_timed_get(c, "/health").json())
            assert _committed(c, "ad-0").status_code == 200, "the downloaded view went away"
            time.sleep(0.5)
    finally:
        s3.server.start()  # the session's other tests need it, whatever happened here

    assert during[-1]["records_in"] > before["records_in"], "records stopped during the outage"
    assert during[-1]["watermark"] > before["watermark"], "the watermark stood still"
    # a checkpoint begun before the stop may still complete; none begun after it can
    stuck = {b["last_checkpoint"] for b in during[len(during) // 3 :]}
    assert len(stuck) == 1, stuck
    degraded = [h for h in health if h["status"] == "degraded"]
    assert degraded, health[-3:]
    reason = degraded[-1]["problems"]["t1"]
    assert "checkpoint" in reason and "failed" in reason and s3.url in reason, reason
    assert "cannot reach http://127.0.0.1:" in reason, reason

    (last,) = stuck
    wait_until(
        lambda: (_job_body(c)["last_checkpoint"] or 0) > last, 30.0, what="a checkpoint after"
    )
    assert _timed_get(c, "/health").json()["status"] == "ok"
    server.wait_finished(120.0)
    _assert_matches(ref, out, state)
    _committed_reads_serve_the_model(c, ref)
    assert "checkpoint=" in server.stderr() and "failed: " in server.stderr()


def _committed_reads_serve_the_model(c: httpx.Client, ref: Any) -> None:
    """After the final checkpoint, committed reads give the model's windows for every key."""
    want: dict[str, list[dict[str, Any]]] = {}
    for (key, _s, _e), emitted in sorted(ref.emissions.items()):
        want.setdefault(key, []).append(
            {k: v for k, v in emitted[-1].items() if k not in ("op", "key")}
        )

    def matches() -> bool:
        for key, windows in want.items():
            r = _committed(c, key)
            if r.status_code != 200:
                return False
            if sorted(r.json()["windows"], key=lambda w: w["start"]) != windows:
                return False
        return True

    wait_until(matches, 30.0, 0.2, what="committed reads equal to the model")
