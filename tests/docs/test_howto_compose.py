"""The docker-compose how-to (docs/how-to/docker-compose.md): its secrets script makes private
files and sets what the compose file requires (Debian's ``docker-compose config`` judges it; no
Docker engine runs here), the file refuses without them with the line the page quotes, and its
query answers from the demo job the stack's ``job`` service runs (``weir demo``: the same job and
operator, with the token the script made)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.tutorial import Reader

ROOT = Path(__file__).resolve().parents[2]
HOWTO = ROOT / "docs" / "examples" / "howto"
PAGE = ROOT / "docs" / "how-to" / "docker-compose.md"
CONFIG = f"docker-compose -f {ROOT / 'docker-compose.yml'} config -q"


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    reader = Reader(tmp_path, HOWTO)
    try:
        yield reader
    finally:
        reader.stop_all()


def test_the_secrets_script_gives_compose_what_it_requires(reader: Reader) -> None:
    refused = reader.attempt("sh", "-c", CONFIG, timeout=60)
    assert refused.returncode != 0
    quoted = "set WEIR_S3_SECRET to the object store's secret key (no default)"
    assert quoted in refused.stderr.decode() and quoted in PAGE.read_text()

    reader.run("sh", "-c", f". ./compose_secrets.sh && {CONFIG}", timeout=60)
    for name in ("weir-token", "s3-secret"):
        path = reader.root / name
        assert path.stat().st_mode & 0o777 == 0o600 and len(path.read_text().strip()) == 32
    token = (reader.root / "weir-token").read_text()
    reader.run("sh", "compose_secrets.sh")  # run again: the secrets are kept
    assert (reader.root / "weir-token").read_text() == token


def test_the_query_answers_from_the_demo_job_with_the_token(reader: Reader) -> None:
    reader.run("sh", "compose_secrets.sh")
    reader.env["WEIR_API_TOKEN"] = (reader.root / "weir-token").read_text().strip()
    (reader.root / "demo.sh").write_text("weir demo\n")
    url = reader.serving(reader.start("demo.sh", "demo.log"), "demo.log")
    reader.rewrite({"http://127.0.0.1:8000": url})

    def top() -> dict[str, object] | None:
        answer = json.loads(reader.run("sh", "compose_query.sh"))
        return answer if len(answer.get("keys", [])) == 3 else None

    answer = wait_until(top, 60, 1.0, what="a fired window's top three")
    assert answer["job"] == "ad-stats" and answer["op"] == "impressions"


def test_the_page_includes_the_snippets() -> None:
    text = PAGE.read_text()
    for name in ("compose_secrets.sh", "compose_query.sh"):
        assert f'--8<-- "examples/howto/{name}"' in text, f"the page lacks {name}"
