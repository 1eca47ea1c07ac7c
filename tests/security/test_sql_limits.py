"""SQL that would exhaust the parser's recursion is refused with one line: ``weir explain`` of a
file an attacker (or a generator) wrote with 200 nested parentheses, or with a chain of 5,000
operators, ends with exit 2 and a ``weir: error:`` naming the place, never a RecursionError
traceback. Text past the parse-size limit is refused before sqlglot reads it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import WEIR
from tests.support.servers import Env
from weir.engine.sql.dialect import MAX_SQL_CHARS

TABLE = """CREATE TABLE events (
  id STRING, event STRING, ts BIGINT, `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'url', 'url' = 'generator://ads?rate=10');
"""
VIEW = """CREATE VIEW v AS SELECT id, window_start, window_end, SUM({expr}) AS x
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY id, window_start, window_end;
"""


def _explain(path: Path, env: Env) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WEIR, "explain", str(path)], env=env(None), capture_output=True, text=True, timeout=60
    )


def test_two_hundred_nested_parentheses_are_one_line(tmp_path: Path, weir_env: Env) -> None:
    sql = tmp_path / "deep.sql"
    sql.write_text(TABLE + VIEW.format(expr="(" * 200 + "`value`" + ")" * 200))
    done = _explain(sql, weir_env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("weir: error:")]
    assert len(lines) == 1, done.stderr
    assert f"{sql}:5:" in lines[0] and "parentheses nest deeper than 32 levels" in lines[0]


def test_a_long_operator_chain_is_one_line(tmp_path: Path, weir_env: Env) -> None:
    sql = tmp_path / "chain.sql"
    sql.write_text(TABLE + VIEW.format(expr="+".join(["`value`"] * 5_000)))
    done = _explain(sql, weir_env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert "an expression nests too deeply" in done.stderr


def test_sql_past_the_size_limit_is_refused_unread(tmp_path: Path, weir_env: Env) -> None:
    sql = tmp_path / "huge.sql"
    sql.write_text(TABLE + "-- " + "x" * MAX_SQL_CHARS + "\n")
    done = _explain(sql, weir_env)
    assert done.returncode == 2, done.stderr
    assert "more than weir parses" in done.stderr and "Traceback" not in done.stderr


def test_moderate_nesting_still_compiles(tmp_path: Path, weir_env: Env) -> None:
    sql = tmp_path / "ok.sql"
    sql.write_text(TABLE + VIEW.format(expr="(" * 20 + "`value`" + ")" * 20))
    done = _explain(sql, weir_env)
    assert done.returncode == 0, done.stderr
    assert "v" in done.stdout
