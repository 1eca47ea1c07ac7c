"""The S3 checkpoints how-to (docs/how-to/s3-checkpoints.md), its snippets run with sh against
the session's S3 server (SeaweedFS): the quickstart's job checkpointing to the bucket, its
checkpoints listed from there, a cancel, and a restore into an empty state directory (another
host's); and the wrong-bucket error the page quotes. The page's endpoint, keys, bucket prefix
and state directory are this machine's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.servers import S3Place
from tests.support.tutorial import Reader

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOWTO = DOCS / "examples" / "howto"
PAGE = DOCS / "how-to" / "s3-checkpoints.md"
S3_ENV = DOCS / "examples" / "cluster" / "s3.env"
QUICKSTART = DOCS / "getting-started" / "quickstart"


@pytest.fixture
def reader(tmp_path: Path, s3: S3Place) -> Iterator[Reader]:
    reader = Reader(tmp_path, QUICKSTART, HOWTO)
    env = S3_ENV.read_text()
    for name, value in s3.env.items():
        env = re.sub(rf"^export {name}=\S+", f"export {name}={value}", env, flags=re.M)
    (tmp_path / "s3.env").write_text(env)
    reader.rewrite({"s3://weir/checkpoints": s3.url, "/var/tmp/weir": str(tmp_path / "host2")})
    try:
        yield reader
    finally:
        reader.stop_all()


def test_checkpoints_on_s3_list_and_restore_on_another_host(reader: Reader) -> None:
    first = reader.start("s3_run.sh", "run.log")
    reader.serving(first, "run.log")

    def listed() -> str | None:
        out = reader.attempt("sh", "s3_list.sh").stdout.decode()  # exit 1 until one is there
        return out if re.search(r"^\s+\d+\s+\S+ \S+\s+checkpoint\s", out, re.M) else None

    table = wait_until(listed, 60, 1.0, what="a checkpoint in S3")
    assert re.search(r"^storage: s3://weir/\S+/clicks$", table, re.M)
    reader.run("weir", "cancel", "clicks")
    assert first.wait(30) == 0

    second = reader.start("s3_restore.sh", "restore.log")
    reader.serving(second, "restore.log")
    log = (reader.root / "restore.log").read_text()
    assert re.search(r"restored from s3://weir/\S+/clicks/chk-\d+", log)
    assert (reader.root / "host2").is_dir()


def test_a_wrong_bucket_is_the_error_the_page_quotes(reader: Reader, s3: S3Place) -> None:
    script = (reader.root / "s3_run.sh").read_text().replace(s3.url, "s3://no-such-bucket/x")
    (reader.root / "wrong.sh").write_text(script)
    proc = reader.start("wrong.sh", "wrong.log")
    assert proc.wait(60) == 1  # a storage error: exit 1 (2 is a usage error)
    assert "the bucket does not exist at http://" in (reader.root / "wrong.log").read_text()
    assert "the bucket does not exist at http://" in PAGE.read_text()


def test_the_page_includes_the_snippets() -> None:
    text = PAGE.read_text()
    for name in ("s3_run.sh", "s3_list.sh", "s3_restore.sh"):
        assert f'--8<-- "examples/howto/{name}"' in text, f"the page lacks {name}"
    assert '--8<-- "examples/cluster/s3.env"' in text
