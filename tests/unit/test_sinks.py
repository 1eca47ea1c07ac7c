"""Sink URLs and the JSONL sink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weir import sinks
from weir.base.errors import ConfigError, SinkError


def test_file_url() -> None:
    s = sinks.from_url("file:///tmp/out%20dir/out.jsonl")
    assert s == sinks.JsonlSink(Path("/tmp/out dir/out.jsonl"))
    assert s.describe() == "file:///tmp/out dir/out.jsonl"


@pytest.mark.parametrize("url", ["stdout://", "-"])
def test_stdout_urls(url: str) -> None:
    assert sinks.from_url(url) == sinks.stdout()


def test_a_plain_path_is_a_file_sink_and_a_file_url_with_a_host_is_refused() -> None:
    assert sinks.from_url("out/results.jsonl") == sinks.jsonl("out/results.jsonl")
    with pytest.raises(ConfigError, match=r"three slashes: file:///tmp/out.jsonl$"):
        sinks.from_url("file://tmp/out.jsonl")


def test_file_url_without_path() -> None:
    with pytest.raises(ConfigError, match="sink 'file://' has no path"):
        sinks.from_url("file://")


@pytest.mark.parametrize(
    ("url", "scheme"), [("kafkaz://h/t", "'kafkaz'"), ("gs://b/out.jsonl", "'gs'")]
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


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_jsonl_sink_files_are_created_private(tmp_path: Path) -> None:
    prepared, opened = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    sinks.jsonl(prepared).prepare()
    sinks.jsonl(opened).open().close()
    assert (prepared.stat().st_mode & 0o777) == 0o600
    assert (opened.stat().st_mode & 0o777) == 0o600


def test_rewind_cuts_back_to_a_checkpoints_offset(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = sinks.jsonl(path)
    w = sink.open()
    w.write([{"n": 1}])
    offset = sink.position()
    w.write([{"n": 2}])
    path.write_bytes(path.read_bytes() + b'{"n": 3, "torn')  # a writer killed mid-line
    assert sink.rewind(offset) == len(b'{"n":2}\n{"n": 3, "torn')
    assert _lines(path) == ['{"n":1}']
    w.write([{"n": 2}])  # the replay
    w.close()
    assert _lines(path) == ['{"n":1}', '{"n":2}']
    assert sinks.jsonl(tmp_path / "none.jsonl").position() == 0


def test_rewind_leaves_a_file_shorter_than_the_offset_alone(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"n":1}\n')
    assert sinks.jsonl(path).rewind(100) == 0
    assert path.read_bytes() == b'{"n":1}\n'


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        (b'{"n":1}\n{"n":2}\n', b'{"n":1}\n{"n":2}\n'),
        (b'{"n":1}\n{"n":2', b'{"n":1}\n'),
        (b'{"n":1', b""),
        (b"", b""),
        (b'{"n":1}\n' + b"x" * 200_000, b'{"n":1}\n'),  # a torn line longer than one read
    ],
)
def test_cut_torn_line_keeps_whole_lines_only(tmp_path: Path, content: bytes, kept: bytes) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    assert sinks.jsonl(path).cut_torn_line() == len(content) - len(kept)
    assert path.read_bytes() == kept


def test_kafka_sink_url_options() -> None:
    s = sinks.from_url("kafka://127.0.0.1:9092/results?delivery_timeout_ms=5000")
    # after a URL was parsed, sinks.kafka is still the function (not its module)
    assert sinks.kafka("127.0.0.1:9092", "results") == sinks.from_url(
        "kafka://127.0.0.1:9092/results"
    )
    assert s.delivery_timeout_ms == 5000 and s.describe() == "kafka://127.0.0.1:9092/results"
    with pytest.raises(ConfigError, match=r"delivery_timeout_ms='12' is not valid; use .*1000"):
        sinks.from_url("kafka://h:1/t?delivery_timeout_ms=12")
    with pytest.raises(ConfigError, match=r"unknown option 'acks'; use delivery_timeout_ms or"):
        sinks.from_url("kafka://h:1/t?acks=1")
