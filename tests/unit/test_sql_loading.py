"""A ``.sql`` job loads wherever a job loads: the loader, and a cluster task, which gets the
file's text and writes it under the same name (the suffix tells the loader it is SQL)."""

from __future__ import annotations

from pathlib import Path

import msgpack

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
