"""A ``weir sql`` job's lines read straight into columns (``runtime/task/colscan.py``): its
table's declared types checked on the scanned columns (an int in a DOUBLE column converted as
the record path converts it), its WHERE evaluated as the expression IR (``sql.toir``), its
GROUP BY column read as a column; the same results, late records and dead letters (reasons
included) as the per-record path, whatever lines a batch holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.explain import describe, render
from weir.engine.job import Job
from weir.engine.runtime.task import colscan
from weir.engine.sql import load_script
from weir.testing import Harness, Result

SCRIPT = """
CREATE TABLE events (
  id STRING, e STRING, ts BIGINT, v DOUBLE, x INT, flag BOOLEAN,
  WATERMARK FOR ts AS ts - INTERVAL '5' MILLISECOND
) WITH ('connector' = 'url', 'url' = 'file:///unused.jsonl', 'allowed-lateness' = '3 ms');
CREATE VIEW w AS
SELECT id, window_start, window_end, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s,
       MIN(v) AS lo, AVG(v) AS a
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' MILLISECOND))
WHERE {where}
GROUP BY id, window_start, window_end;
"""
WHERE = "e = 'imp' AND (x IS NULL OR x > 0)"

CLEAN = [
    b'{"id":"a","e":"imp","ts":1,"v":1}\n',  # an int in a DOUBLE column: a float to SQL
    b'{"id":"b","e":"imp","ts":2,"v":2.5,"flag":true}\n',
    b'{"id":"\xc3\xbc","e":"imp","ts":3,"v":-3,"x":1}\n',
    b'{"e":"imp","id":"a","v":4,"ts":4,"extra":{"deep":[1,{"b":null}]}}\n',
    b'{"id":"c","e":"click","ts":5,"v":7}\n',
    b'{"id":"a","e":"imp","ts":6,"v":null}\n',
    b'{"id":"a","e":"imp","ts":7}\n',
    b'{"id":"d","e":"imp","ts":8,"v":9007199254740993}\n',  # rounds to a double
    b'{"id":"d","e":"imp","ts":9,"v":1}\n',
    b'{"id":"a","e":"imp","ts":30,"v":1,"x":null}\n',
    b'{"id":"a","e":"imp","ts":26,"v":2}\n',
    b'{"id":"a","e":"imp","ts":3,"v":5}\n',  # late
    b'{"id":"a","e":"imp","ts":21,"v":5,"id":"z"}\n',  # a duplicate key: the last wins
    b'{"id":"\\u00fc","e":"imp","ts":22,"v":1}\n',  # an escape: orjson reads that line
]
ODD = [  # the table's check converts or refuses a value, or the record path decides
    b'{"id":"a","e":7,"ts":2,"v":1}\n',  # an int in a STRING column: '7'
    b'{"id":"a","e":"imp","ts":2,"v":"six"}\n',  # a string in a DOUBLE column
    b'{"id":"a","e":"imp","ts":2,"v":true}\n',
    b'{"id":"a","e":"imp","ts":2,"x":1.0}\n',  # an integral float in an INT column: 1
    b'{"id":"a","e":"imp","ts":2,"x":1.5}\n',
    b'{"id":"a","e":"imp","ts":2,"x":2147483648}\n',  # past INT
    b'{"id":"a","e":"imp","ts":2,"flag":1}\n',
    b'{"id":"a","e":"imp","ts":2,"v":[1]}\n',
    b'{"id":null,"e":"imp","ts":2,"v":1}\n',  # the NULL key
    b'{"id":5,"e":"imp","ts":2,"v":1}\n',  # an int key: '5'
    b"not json\n",
]


def _job(tmp_path: Path, where: str = WHERE) -> Job:
    path = tmp_path / "job.sql"
    path.write_text(SCRIPT.format(where=where))
    return load_script(path)


def _plain(out: list[Any]) -> list[str]:
    return sorted(repr(sorted(r.items()) if isinstance(r, dict) else r) for r in out)


def _run(job: Job, batches: list[list[bytes]], parallelism: int) -> Result:
    with Harness(job, parallelism=parallelism) as h:
        for lines in batches:
            if lines:
                h.feed(lines, decoded=False)
        h.end()
        return h.finish()


def _same(
    mp: pytest.MonkeyPatch, tmp_path: Path, batches: list[list[bytes]], p: int, where: str = WHERE
) -> tuple[Result, list[bool]]:
    mp.delenv("WEIR_COLUMNAR", raising=False)
    scanned: list[bool] = []
    real = colscan.scan_rows

    def counted(*args: Any) -> Any:
        found = real(*args)
        scanned.append(found is not None)
        return found

    mp.setattr("weir.engine.runtime.task.colchain.scan_rows", counted)
    on = _run(_job(tmp_path, where), batches, p)
    mp.setenv("WEIR_COLUMNAR", "off")
    off = _run(_job(tmp_path, where), batches, p)
    assert _plain(on.results) == _plain(off.results)
    assert _plain(on.late) == _plain(off.late)
    assert _plain(on.dead) == _plain(off.dead)
    return on, scanned


@pytest.mark.parametrize("parallelism", [1, 2])
def test_clean_batches_are_scanned_and_equal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, parallelism: int
) -> None:
    batches = [CLEAN[i : i + 4] for i in range(0, len(CLEAN), 4)]
    on, scanned = _same(monkeypatch, tmp_path, batches, parallelism)
    assert scanned and all(scanned), "every clean batch is read by the scan"
    (late,) = on.late
    assert late["record"]["v"] == 5.0 and type(late["record"]["v"]) is float  # checked
    d = [r for r in on.results if r["key"] == "d"]
    assert d[0]["s"] == 9007199254740993.0 + 1.0  # the int became a double first, as in SQL
    assert all(type(r["s"]) is float for r in on.results if r["s"] is not None)
    assert {r["key"] for r in on.results} == {"a", "b", "ü", "d", "z"}


def test_a_batch_the_check_would_change_takes_the_record_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for line in ODD:
        batches = [CLEAN[:4], [*CLEAN[4:8], line], CLEAN[8:]]
        on, scanned = _same(monkeypatch, tmp_path, batches, 1)
        assert scanned[0] and not scanned[1], line


def test_a_where_that_stays_a_closure_keeps_the_record_path_and_explain_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("WEIR_COLUMNAR", raising=False)
    where = "e = 'imp' AND x / 2 >= 0"
    text = render(describe(_job(tmp_path, where)))
    assert "runs per record, not on columns (x / 2: SQL's integer / and %" in text
    on, scanned = _same(monkeypatch, tmp_path, [CLEAN[:4], CLEAN[4:]], 1, where)
    assert scanned == [] and on.results
    text = render(describe(_job(tmp_path)))
    assert "WHERE e = 'imp' AND (x IS NULL OR x > 0)" in text and "per record" not in text


LINE = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "ü", "\\N", 3, None]), "ts": st.integers(0, 60)},
    optional={
        "e": st.sampled_from(["imp", "imp", "click", 1, None]),
        "v": st.one_of(
            st.integers(-5, 5),
            st.sampled_from([(1 << 63) - 1, 1 << 64, 0.5, -0.0, None, "s", True]),
        ),
        "x": st.sampled_from([None, 1, -1, 0, "y", 2.0, 1 << 40]),
        "flag": st.sampled_from([True, None, 0]),
    },
)


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(LINE.map(_line), max_size=6), max_size=6),
    st.sampled_from([1, 2]),
    st.sampled_from([WHERE, "v > 0 OR e LIKE 'im%'", "id IN ('a', 'b') AND NOT (x < 0)"]),
)
def test_any_lines_equal_the_record_path(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[bytes]], p: int, where: str
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _same(mp, tmp_path_factory.mktemp("sql"), batches, p, where)
