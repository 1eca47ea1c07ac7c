"""Lookup joins in SQL (issue 43, ``FOR SYSTEM_TIME AS OF`` processing time) against a table
weir keeps itself: Flink's ``LookupJoinITCase`` cases ported by name (its ``user_table`` is a
stream here whose rows all arrive before the probe rows, keyed by its PRIMARY KEY ``id``), a
dimension row replacing its key's current one, the state kept, a ``.sql`` job file's
``PROCTIME()`` column, and the refusals."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources, testing
from weir.base.errors import JobDefinitionError
from weir.engine.explain import describe
from weir.engine.spark.plan import backfill_operators
from weir.engine.sql import SqlUnsupported, load_script

USERS = [(11, 1, "Julian"), (22, 2, "Jark"), (33, 3, "Fabian"), (11, 4, "Hello world"),
         (11, 5, "Hello world")]  # fmt: skip
SRC = [(1, 12, "Julian"), (2, 15, "Hello"), (3, 15, "Fabian"), (8, 11, "Hello world"),
       (9, 12, "Hello world!")]  # fmt: skip
NULLABLE_SRC = [(None, 15, "Hello"), (3, 15, "Fabian"), (None, 11, "Hello world"),
                (9, 12, "Hello world!")]  # fmt: skip


def _job(query: str) -> Job:
    job = Job("lookup")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
    )
    tables = {
        "src": events.filter(lambda e: e["t"] == "src"),
        "user_table": events.filter(lambda e: e["t"] == "user"),
    }
    job.sql("j", query, tables=tables, primary_keys={"user_table": ("id",)})
    return job


def _rows(src: list[tuple[Any, ...]] = SRC) -> list[dict[str, Any]]:
    users = [{"t": "user", "age": a, "id": i, "name": n, "ts": 0} for a, i, n in USERS]
    probes = [
        {"t": "src", "id": i, "len": ln, "content": c, "ts": k + 1}
        for k, (i, ln, c) in enumerate(src)
    ]
    return users + probes


def _run(query: str, columns: str, src: list[tuple[Any, ...]] = SRC) -> list[str]:
    got = testing.run(_job(query), _rows(src))
    assert not got.dead
    names = columns.split(",")
    return sorted(
        ",".join("null" if r[c] is None else str(r[c]) for c in names) for r in got.by_operator["j"]
    )


SELECT = "SELECT T.id AS id, T.len AS len, T.content AS content, D.name AS name, D.age AS age "
LOOKUP = "FROM src AS T JOIN user_table FOR SYSTEM_TIME AS OF PROCTIME() AS D "
LEFT_LOOKUP = LOOKUP.replace(" JOIN", " LEFT JOIN")


def test_join_temporal_table() -> None:
    got = _run(SELECT + LOOKUP + "ON T.id = D.id", "id,len,content,name")
    assert got == sorted(["1,12,Julian,Julian", "2,15,Hello,Jark", "3,15,Fabian,Fabian"])


def test_join_temporal_table_with_udf_equal_filter() -> None:
    query = SELECT + LOOKUP + "ON T.id = D.id WHERE CONCAT('Hello-', D.name) = 'Hello-Jark'"
    assert _run(query, "id,len,content,name") == ["2,15,Hello,Jark"]


def test_join_temporal_table_on_nullable_key() -> None:
    got = _run(SELECT + LOOKUP + "ON T.id = D.id", "id,len,name", NULLABLE_SRC)
    assert got == ["3,15,Fabian"]


def test_join_temporal_table_with_push_down() -> None:
    got = _run(SELECT + LOOKUP + "ON T.id = D.id AND D.age > 20", "id,len,content,name")
    assert got == sorted(["2,15,Hello,Jark", "3,15,Fabian,Fabian"])


def test_join_temporal_table_with_non_equal_filter() -> None:
    got = _run(SELECT + LOOKUP + "ON T.id = D.id WHERE T.len <= D.age", "id,len,content,name,age")
    assert got == sorted(["2,15,Hello,Jark,22", "3,15,Fabian,Fabian,33"])


def test_join_temporal_table_on_multi_fields() -> None:
    """An equality of a column beyond the primary key is part of the join's condition."""
    got = _run(SELECT + LOOKUP + "ON T.id = D.id AND T.content = D.name", "id,len,name")
    assert got == sorted(["1,12,Julian", "3,15,Fabian"])


def test_left_join_temporal_table() -> None:
    got = _run(SELECT + LEFT_LOOKUP + "ON T.id = D.id", "id,len,name,age")
    assert got == sorted(
        ["1,12,Julian,11", "2,15,Jark,22", "3,15,Fabian,33", "8,11,null,null", "9,12,null,null"]
    )


def test_left_join_temporal_table_with_pre_filter() -> None:
    got = _run(SELECT + LEFT_LOOKUP + "ON T.id = D.id AND T.len < 15", "id,len,name,age")
    assert got == sorted(
        ["1,12,Julian,11", "2,15,null,null", "3,15,null,null", "8,11,null,null",
         "9,12,null,null"]
    )  # fmt: skip


def test_left_join_temporal_table_on_nullable_key() -> None:
    got = _run(SELECT + LEFT_LOOKUP + "ON T.id = D.id", "id,len,name", NULLABLE_SRC)
    assert got == sorted(["null,15,null", "3,15,Fabian", "null,11,null", "9,12,null"])


def test_left_join_temporal_table_on_mult_key_fields() -> None:
    got = _run(SELECT + LEFT_LOOKUP + "ON T.id = D.id AND T.content = D.name", "id,len,name,age")
    assert got == sorted(
        ["1,12,Julian,11", "2,15,null,null", "3,15,Fabian,33", "8,11,null,null",
         "9,12,null,null"]
    )  # fmt: skip


class PythonLookupJoin:
    """The LEFT lookup join as a user writes it with the job API: the current user row per
    id in value state, each probe row joined with it on arrival."""

    def process1(self, row: dict[str, Any], ctx: Any) -> None:
        user = ctx.value("user").get() if row["id"] is not None else None
        ctx.emit({"id": row["id"], "name": user and user["name"]})

    def process2(self, user: dict[str, Any], ctx: Any) -> None:
        ctx.value("user").set(user)


def test_the_left_join_equals_its_python_twin_at_parallelism_1_and_2() -> None:
    rows = _rows(SRC + NULLABLE_SRC)
    for p in (1, 2):
        python = Job("lookup")
        src = python.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
        )
        probes = src.filter(lambda e: e["t"] == "src")
        users = src.filter(lambda e: e["t"] == "user")
        probes.connect(users).key_by("id", "id").process(PythonLookupJoin(), name="j")
        twin = testing.run(python, rows, parallelism=p).by_operator["j"]
        sql = testing.run(_job(SELECT + LEFT_LOOKUP + "ON T.id = D.id"), rows, parallelism=p)
        got = Counter((r["id"], r["name"]) for r in sql.by_operator["j"])
        assert got == Counter((r["id"], r["name"]) for r in twin), p
        assert got[(3, "Fabian")] == 2 and got[(None, None)] == 2


def test_a_dimension_row_replaces_its_keys_current_row() -> None:
    """The probe row meets the row current when it arrives, whatever the rows' times (rows
    under one watermark may be handled input by input, so the probe rows here come under a
    later watermark than the rows they are to meet)."""
    rows = [
        {"t": "user", "age": 1, "id": 7, "name": "old", "ts": 10},
        {"t": "src", "id": 7, "len": 1, "content": "a", "ts": 20},
        {"t": "user", "age": 2, "id": 7, "name": "new", "ts": 5},  # an earlier time: current
        {"t": "src", "id": 8, "len": 9, "content": "-", "ts": 30},  # moves the watermark on
        {"t": "src", "id": 7, "len": 2, "content": "b", "ts": 31},
    ]
    got = testing.run(_job(SELECT + LOOKUP + "ON T.id = D.id"), rows)
    assert [(r["content"], r["name"]) for r in got.by_operator["j"]] == [("a", "old"), ("b", "new")]
    assert not got.side.get("j", {}).get("late")  # processing time: nothing is late


def test_a_sql_job_file_declares_its_processing_time_column(tmp_path: Path) -> None:
    path = tmp_path / "lookup.sql"
    path.write_text(
        "CREATE TABLE ev (t STRING, id BIGINT, name STRING, ts BIGINT, pt AS PROCTIME(), "
        "PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR ts AS ts) "
        "WITH ('url' = 'file:///unused.jsonl');\n"
        "CREATE VIEW j AS SELECT p.ts AS at, d.name AS name FROM ev AS p LEFT JOIN ev "
        "FOR SYSTEM_TIME AS OF p.pt AS d ON p.id = d.id WHERE p.t = 'probe';"
    )
    rows = [{"t": "dim", "id": 1, "name": "one", "ts": 0}, {"t": "probe", "id": 1, "ts": 1},
            {"t": "probe", "id": 2, "ts": 2}]  # fmt: skip
    got = testing.run(load_script(path), rows).by_operator["j"]
    # the probe rows are rows of the kept table too: the one of id 1 meets the row before it
    assert [(r["at"], r["name"]) for r in got] == [(1, "one"), (2, None)]


def test_explain_and_the_backfill_name_the_lookup_join() -> None:
    job = _job(SELECT + LEFT_LOOKUP + "ON T.id = D.id")
    assert (
        "LEFT lookup join FOR SYSTEM_TIME AS OF PROCTIME(), current rows of user_table by id"
        in (str(describe(job)))
    )
    with pytest.raises(JobDefinitionError, match="'j' of job 'lookup' is a SQL lookup join"):
        backfill_operators(job, None)


def test_join_temporal_table_on_constant_key_is_refused() -> None:
    """``testJoinTemporalTableOnConstantKey`` (``ON D.id = 1``): weir keeps the table keyed
    by its primary key, which a probe column must equal."""
    with pytest.raises(SqlUnsupported, match=r"ON equates its whole primary key \(id\)"):
        _job(SELECT + LOOKUP + "ON D.id = 1")
