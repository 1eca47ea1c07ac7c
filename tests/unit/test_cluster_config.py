"""Cluster mode's settings: what ``--master`` requires, the flags' checks, and the task
description Spark carries to every task (``TaskPayload``: data only, the job file's text, the
settings the task's worker needs and nothing else of this process's environment)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgpack
import pytest

from weir.app.parser import parse
from weir.base.errors import ConfigError
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.spark_task import TaskPayload

JOB = "from weir import Job\njob = Job('j')\n"


def test_master_needs_checkpoint_storage_every_executor_reaches(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give `checkpoint_dir` s3://BUCKET/PREFIX"):
        RunConfig(job_file=tmp_path / "job.py", master="spark://127.0.0.1:7077")
    RunConfig(job_file="j.py", master="spark://h:7077", checkpoint_dir="s3://b/p")


def _payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TaskPayload, RunConfig]:
    job = tmp_path / "jobs" / "ads.py"
    job.parent.mkdir()
    job.write_text(JOB)
    for name in os.environ:
        if name.startswith(("AWS_", "WEIR_")):
            monkeypatch.delenv(name)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "id",
        "WEIR_S3_ADDRESSING": "path",
        "WEIR_KAFKA_SASL_PASSWORD": "pw",
        "WEIR_API_TOKEN": "not for tasks",
        "HOME_SECRET": "nor this",
    }.items():
        monkeypatch.setenv(name, value)
    cfg = RunConfig(
        job_file=job,
        state_dir=tmp_path / "driver-state",
        parallelism=3,
        checkpoint_dir="s3://weir/chk",
        checkpoint_interval_ms=500,
        master="spark://127.0.0.1:7077",
        spark_conf=(("spark.executor.memory", "1g"),),
    )
    auth = PeerAuth.new(4)
    facts = RunFacts(run_id="r7-2", restore_from="s3://weir/chk/j/chk-3")
    payload = TaskPayload.build(
        cfg, facts, "j", "tcp:10.0.0.1:4000", auth, ("AWS_", "WEIR_S3_", "WEIR_KAFKA_")
    )
    return payload, cfg


def test_payload_is_msgpack_data_and_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload, _ = _payload(tmp_path, monkeypatch)
    raw = payload.encode()
    assert TaskPayload.decode(raw) == payload
    assert isinstance(msgpack.unpackb(raw, raw=False), dict)  # plain data, no pickle
    assert payload.env == {
        "AWS_ACCESS_KEY_ID": "id",
        "WEIR_S3_ADDRESSING": "path",
        "WEIR_KAFKA_SASL_PASSWORD": "pw",
    }
    assert payload.job_text == JOB and payload.attempt == 4


def test_task_config_puts_everything_under_the_executor_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload, cfg = _payload(tmp_path, monkeypatch)
    work = tmp_path / "executor" / "w1"
    work.mkdir(parents=True)
    task, facts = payload.config(work, "10.0.0.7")
    assert task.state_dir == work / "state" and task.backfill_dir == work / "backfill"
    assert task.job_file == work / "ads.py"
    assert Path(task.job_file).read_text() == JOB
    assert stat.S_IMODE(os.stat(task.job_file).st_mode) == 0o600
    assert (task.exchange_transport, facts.worker_host, facts.serve_state) == (
        "tcp", "10.0.0.7", True
    )  # fmt: skip
    assert (facts.run_id, facts.restore_from) == ("r7-2", "s3://weir/chk/j/chk-3")
    assert task.master is None and task.spark_conf == ()  # the task submits nothing
    same = ("parallelism", "checkpoint_dir", "checkpoint_interval_ms", "batch_size")
    assert all(getattr(task, f) == getattr(cfg, f) for f in same)


def test_a_module_job_is_imported_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = RunConfig(job_file="mypkg.jobs:ads", checkpoint_dir="s3://b/p", master="yarn")
    payload = TaskPayload.build(cfg, RunFacts(), "j", "tcp:h:1", PeerAuth.new(0), ())
    assert payload.job_text is None
    assert payload.config(tmp_path, "h")[0].job_file == "mypkg.jobs:ads"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--spark-conf", "executor.memory=2g"], "is not a Spark setting"),
        (["--spark-conf", "spark.executor.memory"], "is not a Spark setting"),
        (["--master", "local[2]"], "local"),
        (["--master", "mesos://h:5050"], "spark://"),
    ],
)
def test_bad_cluster_flags_name_the_value(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["run", "job.py", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and argv[1] in err


def test_cluster_flags_parse() -> None:
    args = parse(
        ["run", "job.py", "--master", "spark://127.0.0.1:7077", "--spark-conf",
         "spark.executor.memory=2g", "spark.task.cpus=1", "--driver-host", "10.0.0.1"]
    )  # fmt: skip
    assert args.master == "spark://127.0.0.1:7077" and args.driver_host == "10.0.0.1"
    assert args.spark_conf == [("spark.executor.memory", "2g"), ("spark.task.cpus", "1")]
