"""A ``.sql`` job loads wherever a job loads: the loader, and a cluster task, which gets the
file's text and writes it under the same name (the suffix tells the loader it is SQL)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.loader import load_configured_job, load_job
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.spark_task import TaskPayload

EXAMPLE = Path(__file__).resolve().parents[2] / "app" / "examples" / "ad_stats.sql"


def test_a_cluster_task_gets_the_sql_job_text_and_loads_it(tmp_path: Path) -> None:
    job_file = tmp_path / "ads.sql"
    job_file.write_text(EXAMPLE.read_text())
    cfg = RunConfig(job_file=job_file, checkpoint_dir="s3://b/p", master="spark://h:7077")
    payload = TaskPayload.build(cfg, RunFacts(), "ad-stats-sql", "tcp:h:1", PeerAuth.new(0), ())
    sent = TaskPayload.decode(msgpack.packb(msgpack.unpackb(payload.encode())))
    assert sent.job_text == EXAMPLE.read_text()
    executor = tmp_path / "executor"
    executor.mkdir()
    task, _ = sent.config(executor, "10.0.0.7")
    assert Path(task.job_file).name == "ads.sql" and Path(task.job_file).exists()
    assert list(load_job(task.job_file).operators) == ["impressions", "by_event"]


def test_source_flag_replaces_the_tables_url(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    cfg = RunConfig(job_file=EXAMPLE, source_url=f"file://{events}")
    job = load_configured_job(cfg)
    assert job.sources[0].source.describe() == f"file://{events}"
    # SQL's WATERMARK FOR ts AS ts - INTERVAL '2' SECOND: max(ts) - 2 000, the bound 1 999
    assert job.sources[0].timestamp == "ts" and job.sources[0].watermarks.bound_ms == 1_999


_TUMBLE = "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
# a query per planner: a plain SELECT is plan_query's alone, and only a query that is not one
# loads the other planners (``build.plain_select``)
_QUERIES = {
    "windowed": (
        True,
        f"SELECT id, window_start, window_end, COUNT(*) AS n FROM {_TUMBLE} "
        "WHERE v > 1 GROUP BY id, window_start, window_end",
    ),
    "continuous": (True, "SELECT id, COUNT(*) AS n FROM t GROUP BY id"),
    "recognize": (
        False,
        "SELECT T.aid FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS aid PATTERN (A B) "
        "DEFINE A AS v = 1, B AS v = 2) AS T",
    ),
    "window join": (
        False,
        f"SELECT L.id FROM (SELECT * FROM {_TUMBLE}) L JOIN (SELECT * FROM {_TUMBLE}) R "
        "ON L.window_start = R.window_start AND L.window_end = R.window_end",
    ),
    "temporal": (
        False,
        "SELECT o.id FROM t AS o JOIN r FOR SYSTEM_TIME AS OF o.ts AS x ON o.id = x.id",
    ),
    "interval join": (
        False,
        "SELECT a.id FROM t AS a JOIN u AS b ON a.id = b.id "
        "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts",
    ),
    "row number": (
        False,
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts DESC) AS rn "
        "FROM t) WHERE rn = 1",
    ),
}


@pytest.mark.parametrize("kind", sorted(_QUERIES))
def test_only_a_query_that_is_not_a_plain_select_loads_the_other_planners(kind: str) -> None:
    from weir.engine.sql.build import plain_select
    from weir.engine.sql.dialect import parse
    from weir.engine.sql.recognize import is_match_recognize
    from weir.engine.sql.rownumber import is_row_number
    from weir.engine.sql.sqljoin import is_join
    from weir.engine.sql.temporal import is_temporal
    from weir.engine.sql.windowjoin import is_window_join

    plain, query = _QUERIES[kind]
    (statement,) = parse(query, kind)
    found = [is_match_recognize, is_window_join, is_temporal, is_join, is_row_number]
    assert plain_select(statement) is plain
    assert any(p(statement) for p in found) is not plain
