"""A source's raw lines read straight into columns (``runtime/task/colscan.py``): for a job
whose filters are expressions, key and aggregates fields, the same results, late records and
dead letters (reasons included) as the per-record path, whatever lines a batch holds; clean
batches are read by the scan, the others by the per-record path."""

from __future__ import annotations

import gc
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir import Job, WatermarkStrategy, agg, col, sources, windows
from weir.engine.runtime.task import colscan
from weir.testing import Harness, Result

AGGS: dict[str, dict[str, Any]] = {
    "job": {"n": agg.count(), "s": agg.sum("v"), "hi": agg.max("v")},
    "sql": {
        "n": agg.count(),
        "nv": agg.count("v"),
        "s": agg.sum("v", nulls="skip"),
        "lo": agg.min("v", nulls="skip"),
        "a": agg.avg("v"),
    },
}


def _job(aggs: str) -> Job:
    job = Job("scan")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=5),
        )
        .filter(col("e") == "imp")
        .filter(col("x").is_null() | (col("x") > 0))
        .key_by("id")
        .window(windows.tumbling(ms=10), allowed_lateness_ms=3)
        .aggregate("w", **AGGS[aggs])
    )
    return job


CLEAN = [
    b'{"id":"a","e":"imp","ts":1,"v":1}\n',
    b'{"id":"b","e":"imp","ts":2,"v":2.5}\n',
    b'{"id":"\xc3\xbc","e":"imp","ts":3,"v":-3,"x":1}\n',
    b'{"e":"imp","id":"a","v":4,"ts":4,"extra":{"deep":[1,{"b":null}]}}\n',
    b'{"id":"c","e":"click","ts":5,"v":"not read: filtered"}\n',
    b'{"id":"a","e":"imp","ts":6,"v":null}\n',
    b'{"id":"a","e":"imp","ts":7}\n',
    b'{"id":"d","e":"imp","ts":8,"v":9223372036854775807}\n',
    b'{"id":"d","e":"imp","ts":9,"v":1}\n',
    b'{"id":"a","e":"imp","ts":30,"v":1}\n',
    b'{"id":"a","e":"imp","ts":26,"v":2}\n',  # within allowed lateness? no: on time
    b'{"id":"a","e":"imp","ts":3,"v":5}\n',  # late
    b'{"id":"a","e":"imp","ts":21,"v":5,"id":"z"}\n',  # a duplicate key: the last wins
    b'{"id":"\\u00fc","e":"imp","ts":22,"v":1}\n',  # an escape: orjson reads that line
]
ODD = [
    b"\n",
    b"   \n",
    b"not json\n",
    b"[1, 2]\n",
    b'{"id":"a","e":"imp","ts":1.5,"v":1}\n',  # a float event time
    b'{"id":"a","e":"imp","v":1}\n',  # no event time
    b'{"id":5,"e":"imp","ts":2,"v":1}\n',  # an int key
    b'{"id":null,"e":"imp","ts":2,"v":1}\n',  # the NULL key
    b'{"id":"\\\\N","e":"imp","ts":2,"v":1}\n',  # a key shaped like the NULL key's form
    b'{"id":"a","e":"imp","ts":2,"v":"six"}\n',  # not a number
    b'{"id":"a","e":"imp","ts":2,"v":18446744073709551615}\n',  # past int64, an int to orjson
    b'{"id":"a","e":"imp","ts":2,"x":"y","v":1}\n',  # the filter compares a str with 0
    b'{"id":"a","e":"imp","ts":2,"v":1e400}\n',
    b'{"id":"a","e":"imp","ts":2,"v":true}\n',
    b'{"id":"' + b"k" * 70_000 + b'","e":"imp","ts":2,"v":1}\n',
]
ALSO_CLEAN = [  # lines the scan reads as orjson does: their batch is scanned
    b'{"id":"a","e":7,"ts":2,"v":1}\n',  # 7 == "imp" is FALSE, not an error
    b'{"id":"a","e":"imp","ts":2,"v":18446744073709551617}\n',  # orjson: a float
    b'{"id":"a","e":"imp","ts":2,"v":1}',  # no newline at the end of the batch
]


def _plain(out: list[Any]) -> list[str]:
    return sorted(repr(sorted(r.items()) if isinstance(r, dict) else r) for r in out)


def _run(aggs: str, batches: list[list[bytes]], parallelism: int) -> Result:
    with Harness(_job(aggs), parallelism=parallelism) as h:
        for lines in batches:
            if lines:
                h.feed(lines, decoded=False)
        h.end()
        return h.finish()


def _same(monkeypatch: pytest.MonkeyPatch, aggs: str, batches: list[list[bytes]], p: int) -> Any:
    monkeypatch.delenv("WEIR_COLUMNAR", raising=False)
    scanned: list[int] = []
    real = colscan.scan_rows

    def counted(*args: Any) -> Any:
        found = real(*args)
        scanned.append(found is not None)
        return found

    monkeypatch.setattr("weir.engine.runtime.task.colchain.scan_rows", counted)
    on = _run(aggs, batches, p)
    monkeypatch.setenv("WEIR_COLUMNAR", "off")
    off = _run(aggs, batches, p)
    assert _plain(on.results) == _plain(off.results)
    assert _plain(on.late) == _plain(off.late)
    assert _plain(on.dead) == _plain(off.dead)
    return on, scanned


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("aggs", sorted(AGGS))
def test_clean_batches_are_scanned_and_equal(
    monkeypatch: pytest.MonkeyPatch, aggs: str, parallelism: int
) -> None:
    batches = [CLEAN[i : i + 4] for i in range(0, len(CLEAN), 4)]
    on, scanned = _same(monkeypatch, aggs, batches, parallelism)
    assert scanned and all(scanned), "every clean batch is read by the scan"
    assert len(on.late) == 1
    assert {r["key"] for r in on.results} == {"a", "b", "ü", "d", "z"}
    assert [r["n"] for r in on.results if r["key"] == "ü" and r["start"] == 20] == [1]


@pytest.mark.parametrize("aggs", sorted(AGGS))
def test_a_batch_with_an_odd_line_takes_the_record_path(
    monkeypatch: pytest.MonkeyPatch, aggs: str
) -> None:
    for line in ODD + ALSO_CLEAN:
        batches = [CLEAN[:4], [*CLEAN[4:8], line], CLEAN[8:]]
        _, scanned = _same(monkeypatch, aggs, batches, 1)
        assert scanned[0] and scanned[1] == (line in ALSO_CLEAN), line


def test_items_that_are_not_one_line_each_take_the_record_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Payloads (Kafka's) need not end in a newline, and may hold one: joined, they could
    split into other lines, so such a batch is read item by item (here: two dead letters,
    not two records)."""
    odd = [b'{"id":"a","e":"imp","ts":1,"v":1}\n{"id":"b","e":"imp","ts":2,"v":1}', b""]
    on, scanned = _same(monkeypatch, "job", [CLEAN[:4], odd, [b'{"id":"c"', b',"ts":3}']], 1)
    assert scanned == [True, False, False]
    assert len(on.dead) == 4 and {r["key"] for r in on.results} == {"a", "b", "ü"}


@pytest.mark.parametrize("parallelism", [1, 2])
def test_payloads_without_newlines_are_joined_and_scanned(
    monkeypatch: pytest.MonkeyPatch, parallelism: int
) -> None:
    """Kafka's values (one JSON object each, no newline) are joined by one into a block for the
    scan; a batch where a payload holds a newline, or is empty, takes the record path."""
    payloads = [line.rstrip(b"\n") for line in CLEAN]
    batches = [payloads[i : i + 4] for i in range(0, len(payloads), 4)]
    on, scanned = _same(monkeypatch, "job", batches, parallelism)
    assert scanned and all(scanned) and len(on.late) == 1
    odd = [payloads[:3], [payloads[3], b""], [payloads[4], payloads[5] + b"\n" + payloads[6]]]
    on, scanned = _same(monkeypatch, "job", odd, 1)
    assert scanned == [True, False, False]
    reasons = [d["reason"] for d in on.dead]  # the empty payload, the one with two objects
    assert [r.split(":")[1].strip()[:10] for r in reasons] == ["Input is a", "unexpected"]


def test_the_first_payload_decides_the_join_and_the_scan_checks_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One join per batch, chosen by its first item: payloads that end in a newline are
    joined as they are, others by one. A batch whose other items disagree splits into
    other lines than its items (merged lines, a blank line), so it is read item by item,
    with the same results as the file's lines; one whose items all end in a newline is
    scanned."""
    payloads = [line.rstrip(b"\n") for line in CLEAN]
    mixed = [
        [payloads[0] + b"\n", payloads[1], payloads[2]],  # merged into fewer lines
        [payloads[3], payloads[4] + b"\n", payloads[5]],  # a blank line between
        [p + b"\n" for p in payloads[6:9]],  # every item a whole line
        payloads[9:],
    ]
    on, scanned = _same(monkeypatch, "job", mixed, 1)
    assert scanned == [False, False, True, True]
    lines, _ = _same(monkeypatch, "job", [CLEAN], 1)
    assert _plain(on.results) == _plain(lines.results) and _plain(on.dead) == _plain(lines.dead)


LINE = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "ü", "\\N", 3, None]), "ts": st.integers(0, 60)},
    optional={
        "e": st.sampled_from(["imp", "imp", "click", 1]),
        "v": st.one_of(
            st.integers(-5, 5),
            st.sampled_from([(1 << 63) - 1, 1 << 64, 0.5, -0.0, None, "s", True]),
        ),
        "x": st.sampled_from([None, 1, -1, "y"]),
    },
)


def _line(record: dict[str, Any]) -> bytes:
    """A JSON line as another writer might write it: spaces, and non-ASCII as it is."""
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(LINE.map(_line), max_size=6), max_size=6),
    st.sampled_from(sorted(AGGS)),
    st.sampled_from([1, 2]),
)
def test_any_lines_equal_the_record_path(
    batches: list[list[bytes]], aggs: str, parallelism: int
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _same(mp, aggs, batches, parallelism)


def _in_cycles(blocks: int, aggs: str, parallelism: int) -> list[str]:
    """The objects in garbage cycles after a run of ``blocks`` scanned blocks that hold a
    block's bytes or a column (their types' names)."""
    batches = [
        [b'{"id":"k%d","e":"imp","ts":%d,"v":%d}\n' % (i % 7, 20 * b + i, i) for i in range(50)]
        for b in range(blocks)
    ]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _run(aggs, batches, parallelism)
        gc.collect()
        return sorted(
            type(o).__qualname__
            for o in gc.garbage
            if any(
                isinstance(r, np.ndarray) or (isinstance(r, bytes) and len(r) >= 1_000)
                for r in gc.get_referents(o)
            )
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("aggs", sorted(AGGS))
def test_a_scanned_block_leaves_no_cyclic_garbage(
    monkeypatch: pytest.MonkeyPatch, aggs: str, parallelism: int
) -> None:
    """A worker's loop collects cycles rarely (``gctuning``: a full pass a minute): a block or
    its columns held in a cycle stay in memory until then (an evaluator's table of its own
    bound methods kept every block of a 2M-line file and its columns: 400 MB)."""
    monkeypatch.delenv("WEIR_COLUMNAR", raising=False)
    # what a run leaves in cycles when it ends (the operators' own) does not grow with blocks
    assert _in_cycles(20, aggs, parallelism) == _in_cycles(2, aggs, parallelism)
