"""What a backfill reads, without Spark: formats from extensions, Parquet and CSV rows as the
records JSON would decode to, in file order, and the Kafka URL grammar."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from weir import Job, agg, sources, windows
from weir.base.errors import ConfigError, SourceError
from weir.engine.runtime.outputs import DeadLetters
from weir.engine.runtime.task.chain import Chain
from weir.engine.sources import SourceBatch
from weir.engine.spark.inputs import file_batches, format_of, parse_kafka_url, resolve_inputs


def _records(path: Path, fmt: str, size: int = 8192) -> list[Any]:
    batches = list(file_batches(str(path), fmt, size))
    assert batches[-1].end and all(not b.end for b in batches[:-1])
    return [r for b in batches for r in b.items]


def _job() -> Job:
    job = Job("j")
    (
        job.source(sources.jsonl("/unused.jsonl"), timestamp="ts")
        .key_by("id")
        .window(windows.tumbling(ms=10))
        .aggregate("n", n=agg.count())
    )
    return job


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.jsonl", "jsonl"), ("a.JSON", "jsonl"), ("a.ndjson", "jsonl"), ("a.parquet", "parquet"),
     ("a.csv", "csv")],
)  # fmt: skip
def test_the_format_comes_from_the_extension(name: str, fmt: str) -> None:
    assert format_of(f"/data/{name}", None) == fmt
    assert format_of(f"/data/{name}", "csv") == "csv"  # --format wins


def test_an_unknown_extension_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"/data/events\.txt.*'\.txt'.*`format` jsonl\|parquet"):
        format_of("/data/events.txt", None)
    (tmp_path / "events").write_text("")
    with pytest.raises(ConfigError, match=r"events: cannot tell.*'\(none\)'"):
        resolve_inputs([str(tmp_path / "events")], None, _job())


def test_csv_columns_are_typed_as_json_would_decode_them(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(
        "id,ts,value,ok,when,note\n"
        "ad-0,1000,3,true,2023-01-01T00:00:00,\n"
        '17,1001,2.5,false,2023-01-02,""\n'
        "NA,,4,true,2023-01-03,x\n"
    )
    assert _records(path, "csv") == [
        {"id": "ad-0", "ts": 1000, "value": 3.0, "ok": True, "when": "2023-01-01T00:00:00",
         "note": None},
        {"id": "17", "ts": 1001, "value": 2.5, "ok": False, "when": "2023-01-02", "note": ""},
        {"id": "NA", "ts": None, "value": 4.0, "ok": True, "when": "2023-01-03", "note": "x"},
    ]  # fmt: skip
    # types are inferred over the whole file, not its first block
    rows = ["id,ts,value"] + [f"k,{i},{i}" for i in range(300_000)] + ["k,300000,0.5"]
    path.write_text("\n".join(rows) + "\n")
    got = _records(path, "csv", size=100_000)
    assert [r["ts"] for r in got] == list(range(300_001))  # in file order
    assert type(got[0]["value"]) is float and got[-1]["value"] == 0.5


def test_parquet_times_become_epoch_ms_and_row_groups_keep_their_order(tmp_path: Path) -> None:
    n = 1_000
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    table = pa.table(
        {
            "id": [f"k{i % 7}" for i in range(n)],
            "ts": pa.array([base + dt.timedelta(milliseconds=i) for i in range(n)],
                           pa.timestamp("us", "UTC")),
            "day": pa.array([dt.date(2023, 1, 1)] * n, pa.date32()),
            "price": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(6, 2)),
            "n": list(range(n)),
            "tags": [["a", "b"]] * n,
        }
    )  # fmt: skip
    path = tmp_path / "e.parquet"
    pq.write_table(table, path, row_group_size=128)
    got = _records(path, "parquet", size=100)
    epoch = 1_672_531_200_000
    assert [r["ts"] for r in got] == [epoch + i for i in range(n)]
    assert [r["n"] for r in got] == list(range(n))
    assert got[5] == {"id": "k5", "ts": epoch + 5, "day": epoch, "price": 1.25, "n": 5,
                      "tags": ["a", "b"]}  # fmt: skip


def test_unreadable_files_are_errors_naming_them(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(ConfigError, match=r"bad\.parquet: not a readable Parquet file"):
        resolve_inputs([str(bad)], None, _job())
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(SourceError, match=r"ragged\.csv: cannot read it as csv"):
        _records(ragged, "csv")


def test_csv_and_parquet_rows_take_the_chains_dead_letter_path(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("id,ts\na,5\nb,\nc,7\n")
    dead = DeadLetters(None)
    chain = Chain(_job().sources[0], {}, dead)
    for batch in file_batches(str(path), "csv"):
        chain.process(batch, str(path))
    assert dead.count == 1 and dead.by_reason["timestamp"] == 1
    assert chain.max_ts[str(path)] == 7


def test_a_kafka_record_without_a_value_is_a_dead_letter() -> None:
    dead = DeadLetters(None)
    chain = Chain(_job().sources[0], {}, dead)
    chain.process(SourceBatch([b'{"id": "a", "ts": 1}', None, b"  "], decoded=False), "t/0")
    assert dead.count == 1 and dead.by_reason["decode"] == 1
    assert [keys for _, keys, *_ in chain.keyed] == [["a"]]


def test_the_kafka_url_grammar() -> None:
    url = "kafka://h:9092/ads"
    assert parse_kafka_url(url) == ("h:9092", "ads", ("earliest", {}), ("latest", {}), None)
    assert parse_kafka_url(url + "?from=100&to=0:500,2:20&metadata=true") == (
        "h:9092", "ads", (100, {}), ("latest", {0: 500, 2: 20}), True,
    )  # fmt: skip
    assert parse_kafka_url(url + "?from=1:5&to=900&metadata=false")[2:] == (
        ("earliest", {1: 5}), (900, {}), False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("from=yesterday", r"from='yesterday' is not an offset; use from=earliest, from=N"),
        ("to=-5", r"to='-5' is not an offset"),
        ("to=0:5,1", r"to='0:5,1' is not an offset.*to=P:N,P:N"),
        ("from=latest", r"from='latest' is not an offset"),
        ("group=g", r"unknown option 'group'.*from, to, metadata"),
        ("metadata=maybe", r"metadata='maybe'; use metadata=true or false"),
    ],
)
def test_bad_kafka_urls_name_the_value_and_the_grammar(query: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_kafka_url(f"kafka://h:9092/ads?{query}")
    with pytest.raises(ConfigError, match=r"use kafka://host:port/topic"):
        parse_kafka_url("kafka:///ads")
