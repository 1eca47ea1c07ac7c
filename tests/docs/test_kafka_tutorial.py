"""The Kafka tutorial (docs/tutorials/kafka.md), worked through as written against the session's
Kafka-protocol broker (Tansu): topics made, events sent, the job run with checkpoints, cancelled
as a crash would end it, more events sent, the job restored from its latest checkpoint. The
results file then holds every fired window exactly once, and every command prints what the page
shows."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import wait_until
from tests.support.tutorial import Reader

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = DOCS / "examples" / "kafka"
PAGE = DOCS / "tutorials" / "kafka.md"


@pytest.fixture
def reader(tmp_path: Path, kafka_broker: str) -> Iterator[Reader]:
    reader = Reader(tmp_path, FILES, env={"KAFKA_BOOTSTRAP": kafka_broker})
    try:
        yield reader
    finally:
        reader.stop_all()


def _expected(name: str) -> str:
    return (FILES / name).read_text()


def test_the_kafka_tutorial_runs_as_written(reader: Reader) -> None:
    assert reader.run("python", "create_topics.py") == _expected("create_topics.out")
    assert reader.run("python", "send.py", "clicks-1.jsonl") == "sent 8 events to clicks\n"

    first = reader.start("run.sh", "run.log")
    url = reader.serving(first, "run.log")
    # minute 0's three windows, in the file once the watermark has passed minute 0
    wait_until(lambda: len(reader.lines("results.jsonl")) == 3, 60, 0.2, what="minute 0")
    page_curl = "curl -s 'http://127.0.0.1:8000/clicks/per_minute/state/home?from=60000'"
    assert page_curl in PAGE.read_text()
    asked = shlex.split(page_curl.replace("http://127.0.0.1:8000", url))

    def answered() -> dict[str, Any] | None:
        # the results can reach the file before the state's next flush (50 ms) reaches the API
        answer = json.loads(reader.run(*asked))
        return answer if "windows" in answer else None

    answer = wait_until(answered, 30, 0.1, what="minute 1's window in the state")
    assert [(w["start"], w["views"], w["final"]) for w in answer["windows"]] == [(60000, 1, False)]
    # the page's reader cancels seconds later, after the first checkpoint (one a second): the
    # windows can fire before it completes, on a busy host
    wait_until(
        lambda: httpx.get(f"{url}/jobs/clicks", trust_env=False).json()["last_checkpoint"],
        30,
        0.2,
        what="the first checkpoint",
    )
    cancelled = reader.run("weir", "cancel", "clicks")
    assert re.fullmatch(
        r"job clicks cancelled; weir run --restore latest resumes from \d+\n", cancelled
    )
    assert first.wait(30) == 0

    assert reader.run("python", "send.py", "clicks-2.jsonl") == "sent 4 events to clicks\n"
    second = reader.start("restore.sh", "restore.log")
    reader.serving(second, "restore.log")
    wait_until(lambda: len(reader.lines("results.jsonl")) >= 6, 60, 0.2, what="minute 1")
    assert "restored from" in (reader.root / "restore.log").read_text()

    results = reader.lines("results.jsonl")
    assert sorted(results) == sorted(_expected("results.jsonl.out").splitlines())
    # every window once: the restore cut nothing twice into the file
    windows = [(r["key"], r["start"]) for r in map(json.loads, results)]
    assert len(windows) == len(set(windows)) == 6
    topic = wait_until(
        lambda: (out := reader.run("python", "read_results.py")).count("\n") == 6 and out,
        30,
        0.5,
        what="six windows in click-stats",
    )
    assert topic == _expected("read_results.out")


def test_the_page_includes_every_file_and_output() -> None:
    page = PAGE.read_text()
    for path in FILES.iterdir():
        assert f'--8<-- "examples/kafka/{path.name}"' in page, f"the page lacks {path.name}"
