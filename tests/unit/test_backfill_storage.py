"""A backfill's SST files in storage, on real files: the manifest and its CRC-32 checks
(``state.bulkstore``), the driver's output (``engine.spark.output``), and how a running job
confines a live backfill's path or URL to its ``--backfill-dir`` (``control.backfill``)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from rocksdict import Options, SstFileWriter

from weir.app.cli import config_from_args
from weir.app.parser import parse
from weir.base.errors import ConfigError, PathRefused, StateError
from weir.engine.runtime.control.backfill import LiveBackfill
from weir.engine.spark.output import BackfillOutput
from weir.state.bulkstore import MANIFEST, fetch_ssts, read_manifest
from weir.state.keygroups import KeyGroupRange
from weir.state.objectstore import LocalStore, file_crc


class _Gate:
    def hold(self, timeout_s: float, stopping: threading.Event) -> None:
        raise AssertionError("a refused backfill must not hold checkpoints")

    def release(self) -> None:
        raise AssertionError("a refused backfill must not hold checkpoints")


def _sst(path: Path, kg: int) -> Path:
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path))
    writer[kg.to_bytes(2, "big") + b"\x00\x01window"] = b"\x91\x01"
    writer.finish()
    return path


def _written(out: BackfillOutput, *kgs: int) -> Path:
    """SST files of ``kgs`` where the tasks put them, and the manifest the driver writes."""
    sst = Path(out.sst_url)
    rows = []
    for kg in kgs:
        p = _sst(sst / f"kg-{kg:05d}.sst", kg)
        rows.append({"kg": kg, "path": p.name, "size": p.stat().st_size, "crc32": file_crc(p)})
    out.write_manifest([*rows, {"kg": 9, "path": None, "size": 0, "crc32": 0}])
    return sst


def test_fetch_checks_each_file_against_the_manifest(tmp_path: Path) -> None:
    out = BackfillOutput(tmp_path / "work" / "t1")
    out.clear()
    assert oct((tmp_path / "work" / "t1" / "sst").stat().st_mode & 0o777) == "0o700"
    sst = _written(out, 3, 70)
    assert sorted(read_manifest(LocalStore(sst))) == ["kg-00003.sst", "kg-00070.sst"]

    got = fetch_ssts(str(sst), KeyGroupRange(0, 63), tmp_path / "w0")
    assert [(kg, p.name) for kg, p in got] == [(3, "kg-00003.sst")]
    assert got[0][1].read_bytes() == (sst / "kg-00003.sst").read_bytes()

    data = bytearray((sst / "kg-00070.sst").read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    (sst / "kg-00070.sst").write_bytes(bytes(data))
    with pytest.raises(StateError, match=r"kg-00070\.sst has \d+ bytes and CRC-32 .* manifest"):
        fetch_ssts(str(sst), KeyGroupRange(64, 127), tmp_path / "w1")


def test_a_missing_or_forged_manifest_is_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with pytest.raises(StateError, match=r"files\.json is missing.*weir backfill"):
        read_manifest(store)
    forged = {"files": {"../x.sst": {"size": 1, "crc32": 2}}}
    (tmp_path / MANIFEST).write_text(json.dumps(forged))
    with pytest.raises(StateError, match=r"not a backfill manifest .*'\.\./x\.sst'"):
        read_manifest(store)


def _live(root: str | Path) -> LiveBackfill:
    return LiveBackfill("t1", root, 2, 128, lambda m: None, lambda: None, _Gate())


def _load(live: LiveBackfill, path: str) -> None:
    req = {"op": "imps", "path": path, "min_end": 0, "max_end": 1, "windows": None}
    live.ingest(req, 1.0, lambda: False, threading.Event())


@pytest.mark.parametrize(
    "path",
    [
        "s3://weir/jobs/backfills2/t1/sst",  # a sibling whose name merely starts alike
        "s3://other/jobs/backfills/t1/sst",
        "s3://weir/jobs/backfills/../secrets/sst",
        "s3://weir/jobs/backfills/./t1/sst",
        "s3://weir/jobs",
        "/tmp/t1/sst",
    ],
)
def test_a_path_outside_the_bucket_prefix_is_refused_naming_both(path: str) -> None:
    root = "s3://weir/jobs/backfills"
    with pytest.raises(PathRefused, match=r"is not under the job's backfill storage") as err:
        _load(_live(root), path)
    assert path in str(err.value) and root in str(err.value)


def test_a_url_for_a_directory_root_is_refused_and_a_path_under_it_accepted(
    tmp_path: Path,
) -> None:
    live = _live(tmp_path)
    with pytest.raises(PathRefused, match=rf"'s3://weir/t1/sst' .* storage {tmp_path}"):
        _load(live, "s3://weir/t1/sst")
    with pytest.raises(PathRefused, match=r"gs://x.*use a local path, file:///PATH or s3://"):
        _load(live, "gs://x/t1/sst")
    sst = tmp_path / "t1" / "sst"
    sst.mkdir(parents=True)
    _sst(sst / "kg-00003.sst", 3)
    # confined and listed; then refused only because this job is not running
    with pytest.raises(ConfigError, match=r"job 't1' is not running; nothing was loaded"):
        _load(live, str(sst))


def test_the_backfill_storage_flags_take_s3_urls_and_refuse_other_schemes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(["run", "job.py", "--backfill-dir", "s3://weir/bf/"])
    assert config_from_args(args, "job.py").backfill_dir == "s3://weir/bf"
    args = parse(["run", "job.py", "--backfill-dir", "bf"])
    assert config_from_args(args, "job.py").backfill_dir == Path("bf").absolute()
    for argv in (
        ["run", "job.py", "--backfill-dir", "gs://weir/bf"],
        ["backfill", "job.py", "--input", "x.jsonl", "--live", "http://h:1", "--work-dir", "s3:/b"],
    ):
        with pytest.raises(SystemExit) as exited:
            parse(argv)
        assert exited.value.code == 2
        assert "is not a storage location weir supports" in capsys.readouterr().err
