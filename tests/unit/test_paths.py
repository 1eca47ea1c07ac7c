"""Paths from outside stay inside their directory: ``..``, symlinks out, relative and foreign
paths are refused with a message naming the path; job names that would name other directories
are refused when the job is loaded; checkpoint metadata cannot point a restore elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import chk_dir, job_text, shared_dir
from weir import Job
from weir.base.errors import JobDefinitionError, PathRefused
from weir.base.paths import confined, plain_name
from weir.engine.runtime.loader import load_job
from weir.state.checkpoints import CheckpointStorage, FileRef


def test_a_path_under_the_root_is_accepted_resolved(tmp_path: Path) -> None:
    (tmp_path / "root" / "a" / "b").mkdir(parents=True)
    (tmp_path / "root" / "link").symlink_to(tmp_path / "root" / "a")
    assert (
        confined(tmp_path / "root" / "a" / "b", tmp_path / "root", "x")
        == (tmp_path / "root" / "a" / "b").resolve()
    )
    assert confined(tmp_path / "root" / "link", tmp_path / "root", "x").name == "a"


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ("relative/dir", "is not an absolute path"),
        ("{root}/../elsewhere", r"contains '\.\.'"),
        ("{root}/a/../a", r"contains '\.\.'"),  # even when it would land inside
        ("{tmp}/elsewhere", "is not under"),
        ("{root}/out", r"a symlink to .*elsewhere.* is not under"),
        ("/etc", "is not under"),
    ],
)
def test_paths_leaving_the_root_are_refused(tmp_path: Path, given: str, match: str) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "out").symlink_to(tmp_path / "elsewhere")
    path = Path(given.format(root=root, tmp=tmp_path))
    with pytest.raises(PathRefused, match=match) as err:
        confined(path, root, "backfill path", fix="use --backfill-dir")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a\\b", "x\0"])
def test_names_that_are_not_one_path_component_are_refused(name: str) -> None:
    with pytest.raises(PathRefused, match="is not a plain file name"):
        plain_name(name, "checkpoint file name")


@pytest.mark.parametrize("name", ["../x", "..", "a/b", ".hidden", "x" * 65, ""])
def test_job_names_that_would_leave_the_state_directory_are_refused(name: str) -> None:
    with pytest.raises(JobDefinitionError, match="job name .* is not allowed"):
        Job(name)


def test_a_job_renamed_after_construction_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text(
        job_text(tmp_path / "in.jsonl", bound=0, size=10, lateness=0) + 'job.name = "../x"\n'
    )
    with pytest.raises(JobDefinitionError, match=r"job name '\.\./x' is not allowed"):
        load_job(path)


@pytest.mark.parametrize(
    "raw",
    [
        {"name": "../../evil.sst", "size": 1, "crc32": 0},
        {"name": "000001.sst", "size": 1, "crc32": 0, "shared": "../../../etc/passwd"},
    ],
)
def test_checkpoint_metadata_names_are_plain_file_names(raw: dict[str, object]) -> None:
    with pytest.raises(PathRefused, match="is not a plain file name"):
        FileRef.from_json(raw)


def _checkpoint(root: Path, files: list[dict[str, object]]) -> CheckpointStorage:
    storage = CheckpointStorage(root, "j")
    storage.ensure()
    storage.write_metadata(1, {"id": 1, "workers": [{"index": 0, "files": files}]})
    return storage


def test_a_checkpoint_naming_files_outside_its_storage_cannot_be_restored(tmp_path: Path) -> None:
    storage = _checkpoint(
        tmp_path / "chk", [{"name": "a.sst", "size": 1, "crc32": 0, "shared": "../../x"}]
    )
    problem = storage.problem(1)
    assert problem is not None and "'../../x' is not a plain file name" in problem
    assert storage.latest_valid() is None


def test_a_shared_file_that_is_a_symlink_out_cannot_be_restored(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"x")
    storage = _checkpoint(
        tmp_path / "chk", [{"name": "a.sst", "size": 1, "crc32": 0, "shared": "link.sst"}]
    )
    (shared_dir(storage) / "link.sst").symlink_to(secret)
    problem = storage.problem(1)
    assert problem is not None and "is a symlink to" in problem and str(secret) in problem
    meta = json.loads((chk_dir(storage, 1) / "_metadata").read_text())
    assert meta["workers"][0]["files"][0]["shared"] == "link.sst"
