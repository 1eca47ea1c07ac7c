"""The query load tool against a running job: every kind (point, batch, top-N, SSE) answers,
with latency percentiles, and the run stops by itself."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WeirServer, wait_until

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("ql")
(
    job.source(sources.generator("ads", rate=2000, ids=50), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=500))
    .aggregate("stats", count=agg.count())
)
"""


def test_the_query_load_mixes_every_kind_and_reports_percentiles(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "ql.py"
    job.write_text(JOB)
    server = weir_server(job, "--parallelism", "1")
    client = server.client()
    wait_until(lambda: client.get("/ql/stats/top", params={"by": "count"}).status_code == 200,
               30.0, what="a fired window")  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.query_load", "--url", server.base_url, "--job", "ql",
         "--op", "stats", "--keys", "50", "--seconds", "3", "--connections", "4",
         "--mix", "point=4,batch=2,top=2,sse=1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert 2.5 <= report["seconds"] <= 20
    for kind in ("point", "batch", "top", "sse"):
        entry = report["kinds"][kind]
        assert entry["ok"] > 0 and entry["errors"] == 0, (kind, entry)
        assert entry["p50_ms"] <= entry["p99_ms"]


def test_the_query_load_refuses_remote_hosts() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.query_load", "--url", "http://example.com:8000"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert r.returncode != 0 and "loopback only" in r.stderr


pytestmark = pytest.mark.timeout(120)
