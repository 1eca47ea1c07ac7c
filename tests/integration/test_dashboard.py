"""The dashboard in a real browser: Debian's Chromium, headless, opens ``/`` against a running
job, looks up a key (the page's ``#key=`` link, which submits the same lookup as the form) and
renders its chart; the screenshot is kept in ``test-artifacts/`` (or ``$WEIR_TEST_ARTIFACTS``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support import WeirServer, wait_until

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("dash")
(
    job.source(sources.generator("ads", rate=3000, ids=100), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count(), total=agg.sum("value"))
)
"""

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--virtual-time-budget=6000",
]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is needed for the dashboard test: `make test` installs it"
    return found


def _browse(url: str, profile: Path, *extra: str) -> str:
    r = subprocess.run(
        [_chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_the_dashboard_looks_up_a_key_and_renders_its_chart(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "dash.py"
    job.write_text(JOB)
    server = weir_server(job, "--parallelism", "2", "--checkpoint-interval-ms", "500")
    client = server.client()
    wait_until(
        lambda: (
            client.get("/dash/counts/state/ad-1").status_code == 200
            and client.get("/dash/counts/top", params={"by": "n"}).status_code == 200
        ),
        30.0,
        what="ad-1 to have windows and a window to fire",
    )
    url = f"{server.base_url}/#key=ad-1"
    dom = _browse(url, tmp_path / "profile-1", "--dump-dom")
    chart = re.search(r'<svg id="chart"[^>]*>', dom)
    assert chart, dom[:3000]
    points = int(re.search(r'data-points="(\d+)"', chart.group(0)).group(1))  # type: ignore[union-attr]
    assert points >= 1, chart.group(0)
    assert 'aria-label="n of ad-1 per window"' in chart.group(0)
    assert dom.count("<rect") >= points  # one bar per window
    assert 'href="#key=ad-0"' in dom  # the top-keys table rendered (ad-0 is the most frequent)
    artifacts = Path(os.environ.get("WEIR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = (artifacts / "dashboard.png").resolve()
    shot.unlink(missing_ok=True)
    _browse(url, tmp_path / "profile-2", f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
