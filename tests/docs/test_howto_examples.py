"""The how-to pages' shell snippets (docs/examples/howto/), run with sh against the
quickstart's job as a reader runs them: monitoring (health, metrics, the Prometheus files'
series, ``weir list`` and ``weir checkpoints``) and hardening (a token made private, the API
started with it, reads refused without it and answered with it). The page's port and bind
address are this machine's: a test never binds off loopback."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support import wait_until
from tests.support.tutorial import Reader

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOWTO = DOCS / "examples" / "howto"
QUICKSTART = DOCS / "getting-started" / "quickstart"
PAGE_URL = "http://127.0.0.1:8000"


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    reader = Reader(tmp_path, QUICKSTART, HOWTO)
    try:
        yield reader
    finally:
        reader.stop_all()


def _serve(reader: Reader, script: str) -> str:
    """``script`` started, its URL put where the page's is in every snippet; the job has read
    its file once the home page's last window is final."""
    proc = reader.start(script, f"{script}.log")
    url = reader.serving(proc, f"{script}.log")
    reader.rewrite({PAGE_URL: url})
    return url


def test_the_monitoring_snippets(reader: Reader) -> None:
    _serve(reader, "run_checkpointed.sh")
    health = reader.run("sh", "health.sh")
    assert re.fullmatch(
        r'\{"status":"ok","jobs":\{"clicks":"\w+"\},"problems":\{\}\} 200\n', health
    )

    def metrics() -> str | None:
        out = reader.run("sh", "metrics.sh")
        return (
            out
            if re.search(r'weir_job_state\{job="clicks",state="(running|finished)"\} 1', out)
            else None
        )

    shown = wait_until(metrics, 30, 0.5, what="the job running")
    names = {line.split("{", 1)[0] for line in shown.splitlines()}
    assert names >= {"weir_job_state", "weir_records_in_total"}

    # every series the alerts name is one weir exports (its TYPE line, with or without samples)
    families = set(
        re.findall(r"^# TYPE (\w+) ", reader.run("curl", "-s", f"{_url(reader)}/metrics"), re.M)
    )
    rules = yaml.safe_load((HOWTO / "alerts.yml").read_text())["groups"][0]["rules"]
    used = {n for rule in rules for n in re.findall(r"\bweir_\w+", rule["expr"])}
    assert used and used <= families, used - families
    scrape = yaml.safe_load((HOWTO / "prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["metrics_path"] == "/metrics"
    assert scrape["static_configs"][0]["targets"] == ["127.0.0.1:8000"]

    def status() -> str | None:
        out = reader.run("sh", "status.sh")
        return out if re.search(r"^\s+\d+\s+\S+ \S+\s+checkpoint", out, re.M) else None

    listed = wait_until(status, 30, 0.5, what="a checkpoint listed")
    assert re.search(
        r"^clicks\s+(?:running|finished)\s+\d+\s+http://127\.0\.0\.1:\d+\s+2\s", listed, re.M
    )


def _url(reader: Reader) -> str:
    found = re.search(r"http://127\.0\.0\.1:\d+", (reader.root / "health.sh").read_text())
    assert found
    return found.group(0)


def test_the_hardening_snippets(reader: Reader) -> None:
    reader.run("sh", "token.sh")
    token = reader.root / "weir-token"
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text().strip()) == 32
    # the page binds every interface; a test binds loopback only
    serve = reader.root / "serve.sh"
    serve.write_text(serve.read_text().replace("--api-host 0.0.0.0", "--api-host 127.0.0.1"))
    _serve(reader, "serve.sh")

    def answers() -> list[str] | None:
        lines = reader.run("sh", "check_token.sh").splitlines()
        return lines if '"final":true' in lines[1] and "9223372036854775807" in lines[1] else None

    refused, answered, health = wait_until(answers, 30, 0.5, what="the job to read its file")
    body, status = refused.rsplit(" ", 1)
    assert status == "401" and json.loads(body)["error"]["code"] == "unauthorized"
    assert answered.endswith(" 200") and '"start":60000' in answered
    assert health.endswith(" 200")
    assert token.read_text().strip() not in (reader.root / "serve.sh.log").read_text()


@pytest.mark.parametrize(
    ("page", "names"),
    [
        ("monitoring.md", ["run_checkpointed.sh", "health.sh", "metrics.sh", "prometheus.yml",
                           "alerts.yml", "status.sh"]),
        ("hardening.md", ["token.sh", "serve.sh", "check_token.sh"]),
    ],
)  # fmt: skip
def test_the_pages_include_the_snippets(page: str, names: list[str]) -> None:
    text = (DOCS / "how-to" / page).read_text()
    for name in names:
        assert f'--8<-- "examples/howto/{name}"' in text, f"{page} lacks {name}"
