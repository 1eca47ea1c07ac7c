"""Source URLs, the JSONL file source and the ``ads`` generator."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from weir import sources
from weir.base.errors import ConfigError, SourceError
from weir.engine.sources import GeneratorSource, JsonlSource
from weir.engine.sources.base import LineBlock


def test_file_url_gives_a_jsonl_source_with_decoded_path() -> None:
    src = sources.from_url("file:///tmp/some%20dir/events.jsonl")
    assert src == JsonlSource(Path("/tmp/some dir/events.jsonl"))
    assert src.bounded
    assert src.describe() == "file:///tmp/some dir/events.jsonl"
    assert src.splits() == ["/tmp/some dir/events.jsonl"]


def test_a_plain_path_is_a_file_source_as_a_file_url_is() -> None:
    assert sources.from_url("/plain/path.jsonl") == JsonlSource(Path("/plain/path.jsonl"))
    assert sources.from_url("data/in-*.jsonl") == JsonlSource(Path("data/in-*.jsonl"))
    assert sources.from_url("file://localhost/x.jsonl") == JsonlSource(Path("/x.jsonl"))


def test_a_file_url_with_a_host_is_refused_naming_the_url_it_probably_meant() -> None:
    with pytest.raises(
        ConfigError,
        match=r"source 'file://tmp/x.jsonl' names host 'tmp', which a file URL does not have; "
        r"a file URL has three slashes: file:///tmp/x.jsonl",
    ):
        sources.from_url("file://tmp/x.jsonl")


def test_file_url_without_path_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"source 'file://' has no path; use file:///"):
        sources.from_url("file://")


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("ftp://host/x.jsonl", "'ftp'"), ("gs://b/k.jsonl", "'gs'"), ("s3://b/k", "'s3'")],
)
def test_unknown_source_scheme_names_it_and_the_accepted_ones(url: str, scheme: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"unknown source scheme {scheme}.*file://, generator://"
    ):
        sources.from_url(url)


def test_generator_url_options_are_typed() -> None:
    src = sources.from_url(
        "generator://ads?rate=0&ids=5&skew=1.5&disorder=20&seed=9&count=100&clicks=0.5"
        "&clock=synthetic&start=1000&step=2"
    )
    assert src == GeneratorSource(
        "ads",
        rate=0.0,
        ids=5,
        skew=1.5,
        disorder=20,
        seed=9,
        count=100,
        clicks=0.5,
        clock="synthetic",
        start=1000,
        step=2,
    )
    assert src.bounded


def test_generator_without_count_is_unbounded() -> None:
    assert not sources.from_url("generator://ads?rate=10").bounded


def test_generator_unknown_option_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown option 'speed'; use clicks, clock, count"):
        sources.from_url("generator://ads?speed=3")


def test_generator_option_of_wrong_type_is_named() -> None:
    with pytest.raises(ConfigError, match=r"option ids='many' is not a int"):
        sources.from_url("generator://ads?ids=many")


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("ids=0", "ids=0 must be >= 1"),
        ("rate=-1", "rate=-1.0 must be >= 0"),
        ("clicks=2", r"clicks=2.0 must be within \[0, 1\]"),
        ("clock=moon", "clock='moon'; use wall or synthetic"),
        ("disorder=-5", "disorder=-5 must be >= 0 ms"),
        ("count=-1", "count=-1 must be >= 0"),
    ],
)
def test_generator_option_values_are_checked(query: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        sources.from_url(f"generator://ads?{query}")


def test_unknown_generator_workload() -> None:
    with pytest.raises(ConfigError, match="unknown generator workload 'trades'; use one of ads"):
        sources.from_url("generator://trades")


def test_generator_function_refuses_unknown_keyword() -> None:
    with pytest.raises(ConfigError, match="speed"):
        sources.generator("ads", speed=3)


def _synthetic(**kw: object) -> GeneratorSource:
    opts: dict[str, object] = {"rate": 0, "clock": "synthetic", "count": 2_000, "ids": 20}
    opts.update(kw)
    return sources.generator("ads", **opts)


def _read_all(src: GeneratorSource, batch: int, offset: int = 0) -> list[dict[str, object]]:
    reader = src.open("0", offset)
    out: list[dict[str, object]] = []
    while True:
        b = reader.read_batch(batch)
        out.extend(b.items)
        if b.end:
            return out


def test_generator_same_seed_same_events() -> None:
    a = _read_all(_synthetic(seed=3, disorder=40), 500)
    b = _read_all(_synthetic(seed=3, disorder=40), 500)
    assert a == b
    assert len(a) == 2_000
    assert a != _read_all(_synthetic(seed=4, disorder=40), 500)


def test_generator_events_have_the_documented_shape() -> None:
    events = _read_all(_synthetic(seed=1, start=10_000, step=3), 2_000)
    assert {tuple(sorted(e)) for e in events} == {("event", "id", "ts", "value")}
    assert [e["ts"] for e in events[:4]] == [10_000, 10_003, 10_006, 10_009]
    assert {e["event"] for e in events} == {"impression", "click"}
    assert all(e["id"] in {f"ad-{i}" for i in range(20)} for e in events)


def test_generator_ad_0_is_the_most_frequent() -> None:
    counts = Counter(e["id"] for e in _read_all(_synthetic(seed=11), 2_000))
    assert counts.most_common(1)[0][0] == "ad-0"


def test_generator_disorder_stays_within_bound() -> None:
    events = _read_all(_synthetic(seed=5, disorder=25, start=0, step=1), 2_000)
    assert all(0 <= i - e["ts"] <= 25 for i, e in enumerate(events))  # type: ignore[operator]
    assert any(i != e["ts"] for i, e in enumerate(events))


def test_generator_events_do_not_depend_on_batch_size() -> None:
    """``--batch-size`` is a throughput knob: the same seed must give the same events."""
    one_batch = _read_all(_synthetic(seed=3, disorder=40), 2_000)
    small_batches = _read_all(_synthetic(seed=3, disorder=40), 100)
    assert small_batches == one_batch


def test_generator_reopened_at_an_offset_replays_the_same_events() -> None:
    """Replay after a failure rewinds a source to its offset (DESIGN.md, "Checkpoints")."""
    src = _synthetic(seed=3, disorder=40)
    everything = _read_all(src, 2_000)
    assert _read_all(src, 2_000, offset=700) == everything[700:]


def test_generator_offset_counts_emitted_events() -> None:
    reader = _synthetic(count=50).open("0")
    assert reader.offset() == 0
    batch = reader.read_batch(20)
    assert len(batch.items) == 20 and batch.decoded and not batch.end
    assert reader.offset() == 20 and batch.offsets == {"0": 20}
    assert len(reader.read_batch(100).items) == 30
    assert reader.read_batch(100).end


def test_jsonl_reader_reads_lines_and_offsets(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n')
    src = sources.jsonl(path)
    reader = src.open(str(path))
    batch = reader.read_batch(100)
    assert batch.items == [b'{"a":1}\n', b'{"a":2}\n'] and not batch.decoded
    assert reader.offset() == 16
    assert reader.read_batch(100).end
    reader.close()
    resumed = src.open(str(path), 8)
    assert resumed.read_batch(100).items == [b'{"a":2}\n']
    resumed.close()


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_jsonl_reader_reads_whole_lines_as_blocks_at_any_size(
    tmp_path: Path, ending: bytes
) -> None:
    """A batch is one read cut after its last line end (a ``LineBlock``): the lines, their
    count, the offset after them and the next line's number are those of ``readlines``, for a
    read that ends mid-line, a line longer than a read, blank lines and a file without a final
    newline; a restore at any line's offset reads the same lines on."""
    lines = [b'{"a":1}\n', b"\n", b'{"long":"' + b"x" * 700 + b'"}\n', b"  \n", b'{"a":2}' + ending]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(lines))
    src = sources.jsonl(path)
    for size in (1, 2, 3, 100):
        reader = src.open(str(path))
        got: list[bytes] = []
        while not (batch := reader.read_batch(size)).end:
            assert isinstance(batch.items, LineBlock) and batch.first_line == len(got) + 1
            got += list(batch.items)
            assert reader.offset() == len(b"".join(got)) == batch.offsets[str(path)]
            assert batch.items.data == b"".join(batch.items) and len(batch.items) > 0
        assert got == lines, size
        reader.close()
    for i in range(len(lines)):
        resumed = src.open(str(path), len(b"".join(lines[:i])))
        batch = resumed.read_batch(1000)
        assert batch.items == lines[i:] and batch.first_line == i + 1
        resumed.close()


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_jsonl_line_numbers_hold_for_blocks_that_count_lines_with_the_kernels(
    tmp_path: Path, ending: bytes
) -> None:
    """Blocks of 16 KiB and more count their lines with the kernels' ``count_byte``
    (``file._newlines``): the counts, the next batch's first line and a restore's line number
    far into the file are those of ``readlines``, with blank lines and without a final
    newline."""
    lines = [b'{"i":%d}\n' % i if i % 7 else b"\n" for i in range(20_000)]
    lines[-1] = b'{"last":1}' + ending
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(lines))
    reader = sources.jsonl(path).open(str(path))
    got: list[bytes] = []
    big = 0
    while not (batch := reader.read_batch(400)).end:  # ~38 KB a read
        assert isinstance(batch.items, LineBlock)
        big += len(batch.items.data) >= 16 * 1024
        assert batch.first_line == len(got) + 1 and len(batch.items) == len(list(batch.items))
        got += list(batch.items)
    assert got == lines and big >= 4
    reader.close()
    at = 15_001
    resumed = sources.jsonl(path).open(str(path), len(b"".join(lines[:at])))
    assert resumed.read_batch(100_000).first_line == at + 1
    resumed.close()


def test_jsonl_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(SourceError, match=f"input file {missing} does not exist"):
        sources.jsonl(missing).open(str(missing))
