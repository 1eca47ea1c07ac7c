"""What a SQL user is told: a syntax error's line and column with a caret, and each construct
weir refuses (rather than run it with another meaning), named."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir import Job, JobDefinitionError, WatermarkStrategy, sources
from weir.app.cli import main
from weir.engine.sql import SqlError, SqlSyntaxError, SqlUnsupported, load_script

TABLE = """CREATE TABLE events (id STRING, event STRING, ts BIGINT, `value` DOUBLE,
  other_ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('url' = 'file:///tmp/events.jsonl');
"""
TUMBLE = "TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
GROUP = "GROUP BY id, window_start, window_end"


def _script(tmp_path: Path, body: str, table: str = TABLE) -> Job:
    path = tmp_path / "job.sql"
    path.write_text(table + body)
    return load_script(path)


def _view(tmp_path: Path, select: str) -> Job:
    return _script(tmp_path, f"CREATE VIEW v AS {select};")


def test_a_syntax_error_names_line_and_column_and_shows_a_caret(tmp_path: Path) -> None:
    with pytest.raises(
        SqlSyntaxError, match=r"job\.sql:5:20: SQL syntax error: Expecting \)"
    ) as caught:
        _script(tmp_path, "CREATE VIEW v AS\nSELECT id, COUNT(* FROM events;")
    assert (caught.value.line, caught.value.column) == (5, 20)
    shown = str(caught.value).splitlines()
    assert shown[1:] == ["  SELECT id, COUNT(* FROM events;", " " * 21 + "^^^^"]
    assert isinstance(caught.value, JobDefinitionError)  # exit code 2 on the command line


REFUSED = {
    "join": (
        f"SELECT e.id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} AS e "
        f"JOIN other ON e.id = other.id {GROUP}",
        r"JOIN of a window TVF with other: a window join's sides are both window TVFs of the "
        r"same window",
    ),
    "order by": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} {GROUP} ORDER BY id",
        r"ORDER BY on an unbounded stream",
    ),
    "limit": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} {GROUP} LIMIT 10",
        r"LIMIT on an unbounded stream",
    ),
    "no window and no state ttl": (
        "SELECT id, COUNT(*) AS n FROM events GROUP BY id",
        r"view 'v' groups without a window \(a continuous aggregate\), which keeps one row per "
        r"key for as long as it is told: declare its idle-state retention",
    ),
    "no group by and no state ttl": (
        "SELECT COUNT(*) AS n FROM events",
        r"groups without a window \(a continuous aggregate\)",
    ),
    "tvf without window bounds": (
        f"SELECT id, COUNT(*) AS n FROM {TUMBLE} GROUP BY id",
        r"grouped without window_start and window_end: group by both",
    ),
    "mixed windows": (
        f"SELECT id, COUNT(*) AS n FROM {TUMBLE} GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), id",
        r"either a window table-valued function or a legacy group window, not both",
    ),
    "having": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} {GROUP} "
        "HAVING COUNT(*) > 1",
        r"HAVING",
    ),
    "session without partition": (
        "SELECT id, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE events, "
        f"DESCRIPTOR(ts), INTERVAL '1' SECOND)) {GROUP}",
        r"SESSION without PARTITION BY merges every key's events into one session",
    ),
    "legacy window offset": (
        "SELECT id, COUNT(*) AS n FROM events "
        "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND, INTERVAL '1' SECOND), id",
        r"a legacy group window takes no offset \(Flink refuses its alignment argument too\)",
    ),
    "too many window arguments": (
        "SELECT id, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE events, "
        f"DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' SECOND, INTERVAL '1' SECOND)) {GROUP}",
        r"TUMBLE takes size and an offset",
    ),
    "subquery": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} "
        f"WHERE id IN (SELECT id FROM events) {GROUP}",
        r"subquery",
    ),
    "non-key column": (
        f"SELECT id, event, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} {GROUP}",
        r"SELECT event \(line 4, column 29\): a windowed result holds its GROUP BY columns",
    ),
    "window column in where": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} "
        f"WHERE window_start > 0 {GROUP}",
        r"window_start \(line 4, column \d+\) exists only after windowing",
    ),
    "grouping sets": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} "
        "GROUP BY GROUPING SETS((id), ()), window_start, window_end",
        r"a view is one grouping \(one operator, one key\); write one view per grouping set",
    ),
    "cube": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} "
        "GROUP BY CUBE(id), window_start, window_end",
        r"GROUP BY CUBE \(id\): a view is one grouping",
    ),
    "distinct sum": (
        f"SELECT id, window_start, window_end, SUM(DISTINCT `value`) AS s FROM {TUMBLE} {GROUP}",
        r"DISTINCT is supported in COUNT\(DISTINCT …\) only",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_each_unsupported_construct_is_refused_by_name(tmp_path: Path, case: str) -> None:
    select, message = REFUSED[case]
    with pytest.raises(SqlUnsupported, match=message):
        _view(tmp_path, select)


MISTAKES = {
    "unknown column": (
        f"SELECT id, window_start, window_end, SUM(valeu) AS s FROM {TUMBLE} {GROUP}",
        r"unknown column 'valeu' \(line 4, column \d+\) in table 'events'; did you mean value\? "
        r"its columns: id, event, ts, value, other_ts",
    ),
    "unknown table": (
        "SELECT id, COUNT(*) AS n FROM evnts GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), id",
        r"unknown table 'evnts' \(line 4, column \d+\); tables: events",
    ),
    "unknown function": (
        f"SELECT id, window_start, window_end, STDDEV(`value`) AS s FROM {TUMBLE} {GROUP}",
        r"unknown aggregate function STDDEV .* weir's SQL has COUNT, COUNT\(DISTINCT …\), SUM, "
        r"MIN, MAX, AVG and the registered none",
    ),
    "unknown scalar function": (
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} "
        f"WHERE REVERSE(id) = 'x' {GROUP}",
        r"function REVERSE .* is not a scalar function weir knows; it knows ABS, CAST",
    ),
    "window on a non-time column": (
        "SELECT id, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE events, "
        f"DESCRIPTOR(other_ts), INTERVAL '1' SECOND)) {GROUP}",
        r"the window is on 'other_ts', not a time attribute of table 'events'; its time "
        r"attribute is 'ts'",
    ),
    "legacy bound mismatch": (
        "SELECT id, TUMBLE_START(ts, INTERVAL '2' SECOND), COUNT(*) AS n FROM events "
        "GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), id",
        r"does not match the query's window TUMBLE\(ts, INTERVAL '1' SECOND\)",
    ),
    "reserved name": (
        f"SELECT id, window_start, window_end, COUNT(*) AS `start` FROM {TUMBLE} {GROUP}",
        r"'start' is a field every window result has",
    ),
    "reserved name op": (
        f"SELECT id, window_start, window_end, COUNT(*) AS op FROM {TUMBLE} {GROUP}",
        r"'op' is a field every window result has \(op, key",
    ),
    "unnamed expression": (
        f"SELECT id, window_start, window_end, SUM(`value` * 2) FROM {TUMBLE} {GROUP}",
        r"needs a name for its result field: SUM\(`value` \* 2\) AS name",
    ),
    "bad interval": (
        "SELECT id, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE events, "
        f"DESCRIPTOR(ts), 10)) {GROUP}",
        r"TUMBLE's size is 10, not an interval; write it as INTERVAL '10' SECOND",
    ),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_each_mistake_names_the_value_and_the_candidates(tmp_path: Path, case: str) -> None:
    select, message = MISTAKES[case]
    with pytest.raises(SqlError, match=message):
        _view(tmp_path, select)


SCRIPTS = {
    "insert": ("INSERT INTO sink SELECT id FROM events;", SqlUnsupported, r"INSERT INTO sink"),
    "bare select": (
        "SELECT id FROM events;",
        SqlUnsupported,
        r"a bare SELECT .*: name it, CREATE VIEW name AS SELECT",
    ),
    "unknown setting": (
        "SET 'parallelism.default' = '4';",
        SqlError,
        r"SET 'parallelism.default' is not a setting weir knows; it knows 'pipeline.name'",
    ),
    "bad lateness": (
        "SET 'table.exec.emit.allow-lateness' = 'soon';",
        SqlError,
        r"'soon' is not a duration; write e.g. '5 s'",
    ),
    "no view": ("", SqlError, r"defines no view; add CREATE VIEW"),
    "function not found": (
        "CREATE FUNCTION med AS 'no_such_module.Median';",
        SqlError,
        r"CREATE FUNCTION med AS 'no_such_module.Median': cannot load it \(ModuleNotFoundError",
    ),
    "function not an aggregate": (
        "CREATE FUNCTION med AS 'collections.OrderedDict';",
        SqlError,
        r"lacks create, add, merge, result",
    ),
}


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_script_statements_weir_does_not_run_are_named(tmp_path: Path, case: str) -> None:
    body, error, message = SCRIPTS[case]
    with pytest.raises(error, match=message):
        _script(tmp_path, body)


TABLES = {
    "timestamp type": (
        "CREATE TABLE t (id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('url' = "
        "'file:///x.jsonl');",
        r"ts is TIMESTAMP\(3\); weir's event time is epoch milliseconds, declare it `ts BIGINT`",
    ),
    "no watermark": (
        "CREATE TABLE t (id STRING, ts BIGINT) WITH ('url' = 'file:///x.jsonl');",
        r"CREATE TABLE t has no time attribute; add WATERMARK FOR ts AS ts - INTERVAL '2' SECOND",
    ),
    "unknown option": (
        "CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts) WITH ('url' = 'file:///x.jsonl', "
        "'format' = 'json');",
        r"WITH option\(s\) format unknown; weir reads connector, url, allowed-lateness",
    ),
    "bad url": (
        "CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts) WITH ('url' = 'ftp://x');",
        r"CREATE TABLE t WITH \('url' = …\): unknown source scheme 'ftp'",
    ),
    "two tables": (
        "CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts) WITH ('url' = 'file:///x.jsonl');"
        "CREATE TABLE u (ts BIGINT, WATERMARK FOR ts AS ts) WITH ('url' = 'file:///y.jsonl');",
        r"a job reads one source table, and 't' is declared already",
    ),
    "odd watermark": (
        "CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts * 2) WITH ('url' = 'file:///x');",
        r"weir's watermarks are bounded out-of-orderness",
    ),
}


@pytest.mark.parametrize("case", sorted(TABLES))
def test_table_declarations_weir_cannot_read_are_refused(tmp_path: Path, case: str) -> None:
    table, message = TABLES[case]
    with pytest.raises(SqlError, match=message):
        _script(tmp_path, "", table=table)


def test_a_python_job_without_a_named_time_field_cannot_window_in_sql() -> None:
    job = Job("j")
    events = job.source(sources.jsonl("/unused.jsonl"), timestamp=lambda r: r["t"],
                        watermarks=WatermarkStrategy())  # fmt: skip
    with pytest.raises(SqlError, match=r"it declares none \(WATERMARK FOR <column>"):
        job.sql("v", f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {TUMBLE} {GROUP}",
                tables={"events": events})  # fmt: skip


def test_the_command_line_exits_2_with_the_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "bad.sql"
    job.write_text(TABLE + "CREATE VIEW v AS SELECT id, COUNT(*) AS n FROM events GROUP BY id;")
    assert main(["sql", str(job), "--exit-at-end"]) == 2
    err = capsys.readouterr().err
    assert err.count("weir: error:") == 1
    assert "groups without a window (a continuous aggregate)" in err
    job.write_text(TABLE + "CREATE VIEW v AS SELEC id FROM events;")
    assert main(["explain", str(job)]) == 2
    assert (
        f"{job}:4:24: SQL syntax error: cannot parse this CREATE statement"
        in capsys.readouterr().err
    )


def test_a_statement_weir_refuses_is_not_also_warned_about_by_the_parser(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING")
    with pytest.raises(SqlUnsupported, match=r"statement 'SHOW TABLES'"):
        _script(tmp_path, "SHOW TABLES;")
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")], caplog.text
