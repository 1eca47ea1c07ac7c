"""The docs' client examples (docs/examples/live/) against a real ``weir demo`` on loopback.

The tutorial tells the reader to start ``make demo`` (``weir demo``), wait for the first
windows, and run the script; this test does the same, with ``WEIR_URL`` naming the free port
the demo got (the script's default is the demo's 127.0.0.1:8000).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import WEIR, wait_until

LIVE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "live"
SERVING = re.compile(r"weir: job ad-stats serving on (http://127\.0\.0\.1:\d+)\n")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """``weir demo`` on a free loopback port, once ad-0 has a window and a window of five ads
    or more has fired."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    log = tmp_path / "demo.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*WEIR, "demo", "--api-port", "0", "--parallelism", "1"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def serving() -> str | None:
            assert proc.poll() is None, log.read_text()
            m = SERVING.search(log.read_text())
            return m.group(1) if m else None

        url = wait_until(serving, 60, 0.1, "the demo's serving line")

        def ready() -> bool:
            # the first window to fire began at the demo's start, a part of a window: it may
            # hold fewer than the five ads the tutorial lists; so a window with five
            with httpx.Client(base_url=url, timeout=5, trust_env=False) as c:
                top = c.get("/ad-stats/impressions/top", params={"by": "count"})
                ranked = len(top.json()["keys"]) if top.is_success else 0
                return c.get("/ad-stats/impressions/state/ad-0").is_success and ranked >= 5

        wait_until(ready, 90, 0.5, "ad-0 and a fired window of five ads or more")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_the_dashboard_tutorials_client_example_runs_against_the_demo(
    demo: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env["WEIR_URL"] = demo
    out = subprocess.run(
        [sys.executable, str(LIVE / "dashboard_client.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "ok"
    assert "start" in lines[1] and "count" in lines[1] and "final" in lines[1]  # the DataFrame
    assert "key_not_found" in lines
    top = next(line for line in lines if line.startswith("[("))
    assert top.count("('ad-") == 5
    assert re.fullmatch(r"watermark -?\d+", lines[-1]), lines[-1]


def test_every_live_example_has_a_test_and_a_page() -> None:
    pages = "\n".join(p.read_text() for p in LIVE.parents[1].rglob("*.md"))
    for example in LIVE.glob("*.py"):
        assert example.name == "dashboard_client.py", f"{example.name} has no test here"
        assert f'--8<-- "examples/live/{example.name}"' in pages
