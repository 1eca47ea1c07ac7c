"""The dashboard in a real browser: Debian's Chromium, headless, opens ``/`` against a running
job, looks up a key (the page's ``#key=`` link, which submits the same lookup as the form) and
renders its chart, updated over the key's event stream (Server-Sent Events) rather than by
polling; the screenshot is kept in ``test-artifacts/`` (or ``$WEIR_TEST_ARTIFACTS``)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

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
    # driven over the DevTools protocol, in real time: --virtual-time-budget would stand still
    # while a request is open, and the page keeps its event stream open
    "--remote-debugging-port=0",
]
READY = (
    "(() => { const t = document.getElementById('transport');"
    " return t.dataset.transport === 'sse' && Number(t.dataset.events) >= 2"
    " && document.getElementById('chart').dataset.points !== '0'"
    " && document.querySelector('a[href=\"#key=ad-0\"]') !== null; })()"
)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is needed for the dashboard test: `make test` installs it"
    return found


class Page:
    """One page of a headless Chromium, read over the DevTools protocol."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = iter(range(1, 1_000_000))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == n:
                assert "error" not in reply, reply
                result: dict[str, Any] = reply["result"]
                return result

    def evaluate(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return found["result"].get("value")

    def settled(self, expression: str) -> Any:
        """``evaluate``, or None while the page is (re)loading."""
        try:
            return self.evaluate(expression)
        except AssertionError:  # the page navigated away during the call
            return None


@contextmanager
def _browse(url: str, profile: Path, *flags: str) -> Iterator[Page]:
    proc = subprocess.Popen(
        [_chromium(), *FLAGS, *flags, f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30.0,
                   what="Chromium's DevTools port")  # fmt: skip
        port = port_file.read_text().split()[0]
        targets = wait_until(
            lambda: [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list",
                     trust_env=False).json() if t["type"] == "page"],
            30.0, what="the page's target",
        )  # fmt: skip
        with connect(targets[0]["webSocketDebuggerUrl"], max_size=None) as ws:
            yield Page(ws)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


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
    artifacts = Path(os.environ.get("WEIR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = (artifacts / "dashboard.png").resolve()
    shot.unlink(missing_ok=True)
    with _browse(url, tmp_path / "profile") as page:
        wait_until(lambda: page.evaluate(READY), 45.0, what="the page to update over SSE")
        dom = page.evaluate("document.documentElement.outerHTML")
        shot.write_bytes(base64.b64decode(page.call("Page.captureScreenshot")["data"]))
    chart = re.search(r'<svg id="chart"[^>]*>', dom)
    assert chart, dom[:3000]
    points = int(re.search(r'data-points="(\d+)"', chart.group(0)).group(1))  # type: ignore[union-attr]
    assert points >= 1, chart.group(0)
    assert 'aria-label="n of ad-1 per window"' in chart.group(0)
    assert dom.count("<rect") >= points  # one bar per window
    assert 'href="#key=ad-0"' in dom  # the top-keys table rendered (ad-0 is the most frequent)
    # each worker's memory in MiB: its resident set, and how much of it RocksDB holds on hover
    memory = re.findall(r'<td title="resident; (\d+) of it RocksDB\'s[^"]*">(\d+)</td>', dom)
    assert len(memory) == 2 and all(int(rss) > int(held) for held, rss in memory), memory
    # the answers came over the stream, more than once: the page updated over SSE
    shown = re.search(r'<span id="transport" data-transport="(\w+)" data-events="(\d+)"', dom)
    assert shown and shown.group(1) == "sse" and int(shown.group(2)) >= 2, dom[:3000]
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_with_a_token_the_page_streams_with_a_stream_token_and_polls_when_it_cannot(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "dash.py"
    job.write_text(JOB)
    token = "dash-token"
    server = weir_server(job, "--max-streams", "1", env={"WEIR_API_TOKEN": token})
    auth = {"Authorization": f"Bearer {token}"}
    client = server.client()
    wait_until(
        lambda: client.get("/dash/counts/top", params={"by": "n"}, headers=auth).status_code == 200,
        30.0, what="a window to fire",
    )  # fmt: skip
    # typed into the page, which trades it for a read token kept in memory only
    login = (
        f"(() => {{ const t = document.getElementById('token'); t.value = {json.dumps(token)};"
        " t.dispatchEvent(new Event('change')); return true; })()"
    )
    polling = (
        "document.getElementById('transport').dataset.transport === 'poll'"
        " && document.getElementById('chart').dataset.points !== '0'"
    )
    with _browse(f"{server.base_url}/#key=ad-1", tmp_path / "profile") as page:
        # the one stream the API allows is taken: the page's is refused (503), so it polls
        with client.stream("GET", "/dash/counts/state/ad-2/stream", headers=auth) as held:
            lines = held.iter_lines()  # kept: a dropped iterator closes the response
            assert held.status_code == 200 and next(lines).startswith(("data", "id"))
            origin = json.dumps(server.base_url)
            loaded = f"location.origin === {origin} && !!document.getElementById('transport')"
            wait_until(lambda: page.settled(loaded), 30.0, what="the page to load")
            assert page.evaluate(login) is True
            wait_until(lambda: page.settled(polling), 45.0, what="the page to fall back to polling")
        page.evaluate("window.beforeReload = true; location.reload(); true")  # the slot is
        # free again: the page streams, which an EventSource (no headers) can only do with the
        # stream token; a reloaded page has forgotten its token, so it is typed in again
        reloaded = f"!window.beforeReload && {loaded}"
        wait_until(lambda: page.settled(reloaded), 30.0, what="the page to load again")
        assert page.evaluate(login) is True
        wait_until(lambda: page.settled(READY), 45.0, what="the page to update over SSE")


# no name resolves but loopback's: a page that needs a CDN stays blank
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
LOADED_FROM = "performance.getEntriesByType('resource').map(e => e.name)"


def test_swagger_ui_and_redoc_render_offline_from_weirs_own_assets(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Issue 39 item 12: /docs loaded Swagger UI from a CDN and was blank offline."""
    job = tmp_path / "dash.py"
    job.write_text(JOB)
    server = weir_server(job, "--parallelism", "1")
    client = server.client()
    html = client.get("/docs").text
    assert "/docs/static/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
    assert "cdn" not in client.get("/redoc").text.lower()
    assert client.get("/docs/static/../app.py").status_code == 404
    artifacts = Path(os.environ.get("WEIR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    operations = "document.querySelectorAll('.opblock').length"
    with _browse(f"{server.base_url}/docs", tmp_path / "profile", OFFLINE) as page:
        wait_until(lambda: (page.settled(operations) or 0) >= 10, 60.0,
                   what="Swagger UI to render the operations")  # fmt: skip
        shown = page.evaluate("document.body.innerText")
        loaded = page.evaluate(LOADED_FROM)
        shot = base64.b64decode(page.call("Page.captureScreenshot")["data"])
        (artifacts / "docs.png").write_bytes(shot)
    assert "get_state" in shown or "/{job}/{op}/state/{key}" in shown, shown[:2000]
    assert loaded and all(u.startswith(server.base_url) for u in loaded), loaded
    sections = "document.querySelectorAll('[data-section-id]').length"
    with _browse(f"{server.base_url}/redoc", tmp_path / "profile2", OFFLINE) as page:
        wait_until(lambda: (page.settled(sections) or 0) >= 10, 60.0,
                   what="ReDoc to render the operations")  # fmt: skip
        loaded = page.evaluate(LOADED_FROM)
    # ReDoc's sidebar shows Redocly's logo from their site (an image, refused offline): the
    # page renders without it, and nothing else comes from elsewhere
    loaded = [u for u in loaded if not u.startswith("https://cdn.redoc.ly/redoc/logo")]
    assert loaded and all(u.startswith(server.base_url) for u in loaded), loaded


WIDE_JOB = JOB.replace(
    'n=agg.count(), total=agg.sum("value")',
    'n=agg.count(), total=agg.sum("value"), mean_value=agg.avg("value"),'
    ' smallest_value=agg.min("value"), largest_value=agg.max("value")',
)
# every element of each card within the card's right edge, and no sideways scroll of the page
OVERFLOW = """(() => { const bad = [];
  for (const s of document.querySelectorAll('main > section')) {
    const edge = s.getBoundingClientRect().right + 0.5;
    for (const e of s.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      if (r.width && r.right > edge) bad.push(`${s.querySelector('h2').textContent.trim()}:` +
        ` <${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}> ends at ${r.right} > ${edge}`);
    }
  }
  if (document.documentElement.scrollWidth > innerWidth) bad.push('the page scrolls sideways');
  return bad; })()"""
KEY_TABLE_READY = (
    "document.querySelector('#answer table') !== null"
    " && document.querySelector('#workers table') !== null"
    " && document.querySelector('#top table') !== null"
)


def test_the_dashboard_fits_common_screens(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Issue 39 item 12: at 1400x1000 the Workers table overflowed its card and the key table
    hid its last columns. Checked at 1280x800, 1400x1000 and 1920x1080, with screenshots."""
    job = tmp_path / "wide.py"
    job.write_text(WIDE_JOB)
    server = weir_server(job, "--parallelism", "2")
    client = server.client()
    wait_until(
        lambda: client.get("/dash/counts/top", params={"by": "n"}).status_code == 200,
        30.0, what="a window to fire",
    )  # fmt: skip
    artifacts = Path(os.environ.get("WEIR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    with _browse(f"{server.base_url}/#key=ad-1", tmp_path / "profile") as page:
        found = {}
        for width, height in ((1280, 800), (1400, 1000), (1920, 1080)):
            page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                      deviceScaleFactor=1, mobile=False)  # fmt: skip
            wait_until(lambda: page.settled(KEY_TABLE_READY), 45.0, what="the tables")
            resized = f"innerWidth === {width}"
            wait_until(lambda: page.evaluate(resized), 10.0, what="the resize")  # noqa: B023
            found[(width, height)] = page.evaluate(OVERFLOW)
            shot = base64.b64decode(page.call("Page.captureScreenshot")["data"])
            (artifacts / f"dashboard-{width}x{height}.png").write_bytes(shot)
    assert found == {size: [] for size in found}, found
