"""The cluster tutorial (docs/tutorials/cluster.md), worked through as written: the quickstart's
job run locally with checkpoints on S3 (the session's SeaweedFS server), stopped with a
savepoint, then run on the Spark standalone cluster (the session's: two one-core workers) from
that savepoint, answering the same query through the driver. The page's addresses (bucket
prefix, master, API port) are this machine's; everything else is the page's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.cluster import START_S
from tests.support.servers import S3Place
from tests.support.spark_cluster import SparkCluster
from tests.support.tutorial import Reader, any_checkpoint

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = DOCS / "examples" / "cluster"
QUICKSTART = DOCS / "getting-started" / "quickstart"
PAGE = DOCS / "tutorials" / "cluster.md"
PAGE_URL = "http://127.0.0.1:8000"


@pytest.fixture
def reader(tmp_path: Path, s3: S3Place, spark_cluster: SparkCluster) -> Iterator[Reader]:
    reader = Reader(tmp_path, FILES, QUICKSTART, env=s3.env)
    reader.rewrite(
        {"s3://weir/checkpoints": s3.url, "spark://127.0.0.1:7077": spark_cluster.master_url}
    )
    try:
        yield reader
    finally:
        reader.stop_all()


def _final_answer(reader: Reader, url: str) -> str:
    """``query.sh`` against ``url`` once every window is final (the file has been read)."""
    (reader.root / "query-here.sh").write_text((reader.root / "query.sh").read_text())
    reader.rewrite({PAGE_URL: url})

    def answer() -> str | None:
        out = reader.run("sh", "query-here.sh")
        return out if '"watermark": 9223372036854775807' in out else None

    text = wait_until(answer, 60, 0.5, what="every window final")
    reader.rewrite({url: PAGE_URL})
    return any_checkpoint(text)


def test_the_cluster_tutorial_runs_as_written(reader: Reader, s3: S3Place) -> None:
    # the page's s3.env sets the variables the test server's clients need, no more, no fewer
    exported = re.findall(r"^export (\w+)=", (FILES / "s3.env").read_text(), re.M)
    assert sorted(exported) == sorted(s3.env)
    want = any_checkpoint((FILES / "query.sh.out").read_text())

    local = reader.start("run_local.sh", "local.log")
    url = reader.serving(local, "local.log")
    assert _final_answer(reader, url) == want
    stopped = reader.run("sh", "stop.sh")
    assert re.fullmatch(
        r"job clicks (?:stopped|finished) with savepoint \d+: s3://\S+/clicks/chk-\d+\n", stopped
    )
    assert local.wait(30) == 0

    cluster = reader.start("run_cluster.sh", "cluster.log")
    url = reader.serving(cluster, "cluster.log", timeout=START_S)
    assert _final_answer(reader, url) == want
    log = (reader.root / "cluster.log").read_text()
    assert "restored from s3://" in log
    reader.rewrite({PAGE_URL: url})
    workers = reader.run("sh", "workers.sh")
    assert re.fullmatch(
        r"worker 0 on \S+: key groups 0-63\nworker 1 on \S+: key groups 64-127\n", workers
    ), workers


def test_the_page_includes_every_file() -> None:
    page = PAGE.read_text()
    for path in FILES.iterdir():
        assert f'--8<-- "examples/cluster/{path.name}"' in page, f"the page lacks {path.name}"
