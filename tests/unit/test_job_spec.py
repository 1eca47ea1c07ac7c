"""Jobs named as ``package.module:attr``: the attribute is a Job or a zero-argument function
returning one; the current directory is on the import path; every error names the fix."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import job_text
from weir.base.errors import JobDefinitionError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.loader import load_configured_job, load_job

_names = itertools.count()

FACTORY = """

def make():
    return build()


def build():
    from weir import Job, WatermarkStrategy, sources
    job = Job("made")
    job.source(sources.jsonl("/x.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0)
               ).key_by("id").process(lambda e, ctx: None, name="p")
    return job


class Holder:
    job = job


count = 3
text = lambda: "a string"  # noqa: E731


def boom():
    raise RuntimeError("no jobs today")
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh package in the current directory (tmp_path) with a ``jobs`` module; imports are
    undone afterwards."""
    name = f"specpkg{next(_names)}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "jobs.py").write_text(
        job_text(tmp_path / "in.jsonl", bound=0, size=10, lateness=0) + FACTORY
    )
    (tmp_path / name / "broken.py").write_text("import missing_dependency_of_weir_test\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield name
    for module in set(sys.modules) - before:
        del sys.modules[module]


def test_an_attribute_that_is_a_job(package: str) -> None:
    job = load_job(f"{package}.jobs:job")
    assert job.name == "t1" and list(job.operators) == ["imps"]


def test_a_function_returning_a_job_and_a_dotted_attribute(package: str) -> None:
    assert load_job(f"{package}.jobs:make").name == "made"
    assert load_job(f"{package}.jobs:Holder.job").name == "t1"


def test_overrides_apply_to_a_module_job_too(package: str) -> None:
    cfg = RunConfig(job_file=f"{package}.jobs:make", sink_url="file:///data/out.jsonl")
    assert load_configured_job(cfg).operators["p"].sinks[0].describe() == "file:///data/out.jsonl"


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("nope", r"module {p}\.jobs has no attribute 'nope'; it defines {p}\.jobs:job"),
        ("count", r"job {p}\.jobs:count is a int, not a weir\.Job; name a Job, or a function"),
        ("Holder", r"is a type, not a weir\.Job"),
        ("text", r"job {p}\.jobs:text\(\) returned a str, not a weir\.Job; return the Job"),
        ("boom", r"job {p}\.jobs:boom failed to load: RuntimeError: no jobs today"),
    ],
)
def test_attribute_errors_name_the_fix(package: str, attr: str, message: str) -> None:
    with pytest.raises(JobDefinitionError, match=message.format(p=package)):
        load_job(f"{package}.jobs:{attr}")


def test_a_missing_module_names_where_it_looked(package: str, tmp_path: Path) -> None:
    with pytest.raises(
        JobDefinitionError,
        match=rf"no module named 'nosuchpkg' \(looked in {tmp_path} and sys.path\); run weir "
        "from the directory that holds the package, add that directory to PYTHONPATH",
    ):
        load_job("nosuchpkg.jobs:job")
    with pytest.raises(JobDefinitionError, match=rf"no module named '{package}\.nojobs'"):
        load_job(f"{package}.nojobs:job")


def test_a_module_whose_own_import_fails_says_so(package: str) -> None:
    with pytest.raises(
        JobDefinitionError,
        match=rf"job module {package}\.broken failed to load: ModuleNotFoundError: No module "
        "named 'missing_dependency_of_weir_test'",
    ):
        load_job(f"{package}.broken:job")


def test_a_file_of_that_name_wins_and_paths_still_work(package: str, tmp_path: Path) -> None:
    odd = tmp_path / "odd.name:job"
    odd.write_text("")
    with pytest.raises(JobDefinitionError, match="odd.name:job is not a .py file"):
        load_job("odd.name:job")
    assert load_job(str(tmp_path / package / "jobs.py")).name == "t1"
    with pytest.raises(JobDefinitionError, match="does not exist; .* or package.module:attr"):
        load_job("jobs/nothing.py")


def test_weirs_old_module_names_are_refused(package: str) -> None:
    with pytest.raises(JobDefinitionError, match="imports `engine`, weir's old module name"):
        load_job("engine.job:Job")
