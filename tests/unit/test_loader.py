"""Loading job files and applying ``--source`` / ``--sink`` overrides."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import job_text
from weir import sinks, sources
from weir.base.errors import ConfigError, JobDefinitionError
from weir.engine.runtime import loader
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.loader import load_configured_job, load_job


def _job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(job_text(tmp_path / "in.jsonl", bound=0, size=10, lateness=0))
    return path


def test_load_job(tmp_path: Path) -> None:
    job = load_job(_job_file(tmp_path))
    assert job.name == "t1" and list(job.operators) == ["imps"]
    assert job.sources[0].source == sources.jsonl(tmp_path / "in.jsonl")


def test_missing_job_file(tmp_path: Path) -> None:
    with pytest.raises(JobDefinitionError, match=f"job file {tmp_path / 'x.py'} does not exist"):
        load_job(tmp_path / "x.py")


def test_job_file_must_be_python(tmp_path: Path) -> None:
    other = tmp_path / "job.txt"
    other.write_text("job = 1")
    with pytest.raises(JobDefinitionError, match="is not a .py file"):
        load_job(other)
    with pytest.raises(JobDefinitionError, match="is not a .py file"):
        load_job(tmp_path)


def test_job_file_without_job(tmp_path: Path) -> None:
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    with pytest.raises(JobDefinitionError, match=r"defines no `job`; add `job = Job\(\"name\"\)`"):
        load_job(path)


def test_job_that_is_not_a_job(tmp_path: Path) -> None:
    path = tmp_path / "j.py"
    path.write_text("job = 'hello'\n")
    with pytest.raises(JobDefinitionError, match="`job` in .* is a str, not a weir.Job"):
        load_job(path)


def test_job_file_that_raises_names_the_error(tmp_path: Path) -> None:
    path = tmp_path / "j.py"
    path.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(JobDefinitionError, match="failed to load: RuntimeError: boom at import"):
        load_job(path)


def test_job_definition_errors_in_the_file_pass_through(tmp_path: Path) -> None:
    path = tmp_path / "j.py"
    path.write_text("from weir import Job\njob = Job('bad name')\n")
    with pytest.raises(JobDefinitionError, match="job name 'bad name' is not allowed"):
        load_job(path)


def test_job_without_source(tmp_path: Path) -> None:
    path = tmp_path / "j.py"
    path.write_text("from weir import Job\njob = Job('nosrc')\n")
    with pytest.raises(JobDefinitionError, match="job 'nosrc' has no source"):
        load_job(path)


def test_overrides(tmp_path: Path) -> None:
    cfg = RunConfig(
        job_file=_job_file(tmp_path),
        source_url="file:///data/other.jsonl",
        sink_url="file:///data/out.jsonl",
    )
    job = load_configured_job(cfg)
    assert job.sources[0].source == sources.jsonl("/data/other.jsonl")
    assert job.operators["imps"].sinks == [sinks.jsonl("/data/out.jsonl")]


def test_bad_override_url(tmp_path: Path) -> None:
    cfg = RunConfig(job_file=_job_file(tmp_path), source_url="nope://x")
    with pytest.raises(ConfigError, match="unknown source scheme 'nope'"):
        load_configured_job(cfg)


@pytest.mark.parametrize(
    "line",
    [
        "from engine import Job, agg",
        "import engine.windows",
        "from state.keygroups import key_group",
    ],
)
def test_old_imports_name_the_new_one(tmp_path: Path, line: str) -> None:
    path = tmp_path / "old.py"
    path.write_text(f"{line}\njob = None\n")
    top = line.split()[1].split(".")[0]
    with pytest.raises(
        JobDefinitionError, match=f"imports `{top}`, weir's old module name; import from `weir"
    ):
        load_job(path)


def test_a_users_own_module_named_like_an_old_one_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the job's directory comes after the rest of sys.path, where pytest put weir's source
    # tree (whose `state` folder an installed weir does not have)
    source_tree = Path(__file__).resolve().parents[2]
    kept = [p for p in sys.path if Path(p or ".").resolve() != source_tree]
    monkeypatch.setattr(sys, "path", kept)
    (tmp_path / "state.py").write_text("LIMIT = 3\n")
    path = tmp_path / "j.py"
    path.write_text("import state\njob = state.LIMIT\n")  # the job's directory is on sys.path
    with pytest.raises(JobDefinitionError, match="`job` in .* is a int, not a weir.Job"):
        load_job(path)


SQL_JOB = """
CREATE TABLE events (id STRING, ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'url', 'url' = 'file://{src}');
CREATE VIEW n AS SELECT id, window_start, window_end, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY id, window_start, window_end;
"""


def test_only_a_sql_job_that_runs_no_user_code_shares_its_plan(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("")
    plain, udf, py = tmp_path / "plain.sql", tmp_path / "udf.sql", tmp_path / "job.py"
    plain.write_text(SQL_JOB.format(src=src))
    udf.write_text("CREATE FUNCTION f AS 'pkg.mod.F';\n" + SQL_JOB.format(src=src))
    py.write_text(job_text(src, bound=0, size=1_000, lateness=0))
    assert loader.plan_is_shareable(RunConfig(job_file=plain))
    assert not loader.plan_is_shareable(RunConfig(job_file=udf))  # imports user code
    assert not loader.plan_is_shareable(RunConfig(job_file=py))  # module-level code
    assert not loader.plan_is_shareable(RunConfig(job_file=tmp_path / "missing.sql"))


def test_a_preloaded_plan_is_returned_for_the_same_file_and_overrides_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("")
    path = tmp_path / "plain.sql"
    path.write_text(SQL_JOB.format(src=src))
    monkeypatch.setattr(loader, "_preloaded", None)
    cfg = RunConfig(job_file=path)
    planned = load_configured_job(cfg)
    loader.preload(cfg, planned)
    assert load_configured_job(cfg) is planned
    other = RunConfig(job_file=path, sink_url=f"file://{tmp_path / 'out.jsonl'}")
    assert load_configured_job(other) is not planned
