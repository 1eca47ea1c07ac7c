"""Sink URLs and the JSONL sink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weir import sinks
from weir.engine.errors import ConfigError, SinkError


def test_file_url() -> None:
    s = sinks.from_url("file:///tmp/out%20dir/out.jsonl")
    assert s == sinks.JsonlSink(Path("/tmp/out dir/out.jsonl"))
    assert s.describe() == "file:///tmp/out dir/out.jsonl"


@pytest.mark.parametrize("url", ["stdout://", "-"])
def test_stdout_urls(url: str) -> None:
    assert sinks.from_url(url) == sinks.stdout()


def test_file_url_without_path() -> None:
    with pytest.raises(ConfigError, match="sink 'file://' has no path"):
        sinks.from_url("file://")


@pytest.mark.parametrize(
    ("url", "scheme"), [("kafkaz://h/t", "'kafkaz'"), ("out.jsonl", r"'\(none\)'")]
)
def test_unknown_sink_scheme(url: str, scheme: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown sink scheme {scheme}.*file://, stdout://"):
        sinks.from_url(url)


def test_jsonl_sink_prepare_truncates_and_writers_append_lines(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.jsonl"
    path.parent.mkdir()
    path.write_text("old contents\n")
    sink = sinks.jsonl(path)
    sink.prepare()  # once per run, before any worker opens it
    assert path.read_bytes() == b""
    first, second = sink.open(), sink.open()  # two workers sharing the file
    first.write([{"key": "ü", "n": 1}, {"key": 2, "x": [1, 2]}])
    second.write([{"key": "b", "n": 3}])
    first.write([])
    first.flush()
    first.close()
    second.close()
    assert [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] == [
        {"key": "ü", "n": 1},
        {"key": 2, "x": [1, 2]},
        {"key": "b", "n": 3},
    ]


def test_jsonl_sink_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.jsonl"
    sinks.jsonl(path).prepare()
    assert path.exists()
    other = tmp_path / "c" / "d" / "out.jsonl"
    sinks.jsonl(other).open().close()
    assert other.exists()


def test_unwritable_sink_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "out.jsonl"  # a path below a regular file
    with pytest.raises(SinkError, match=f"cannot write sink file {target}"):
        sinks.jsonl(target).prepare()
    with pytest.raises(SinkError, match=f"cannot write sink file {target}"):
        sinks.jsonl(target).open()
