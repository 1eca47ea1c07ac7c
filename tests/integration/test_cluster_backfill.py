"""``weir backfill`` through object storage, with a real standalone Spark cluster (a master and
two one-core workers on loopback) and the real S3 server.

- On the cluster with ``--work-dir s3://…``: the tasks upload every key group's SST file (the
  manifest's CRC-32s match the objects) and leave none on the executors' disks; the savepoint
  built from those objects restores in a local ``weir run`` whose windows equal the brute-force
  model's.
- ``--live`` into a job running on the cluster with ``--backfill-dir s3://…``: each task
  downloads its key groups' files, and the driver's API then answers the historical windows
  beside the live ones; a path outside the job's backfill storage is refused with a 400 that
  names both.
"""

from __future__ import annotations

import json
import socket
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support import WeirResult, WeirServer, event_lines, job_text, make_events, write_lines
from tests.support.cluster import START_S, ClusterPlace, cluster_place
from tests.support.reference import Spec, simulate
from tests.support.servers import S3Place
from tests.support.spark_cluster import SparkCluster
from weir.state.bulkstore import fetch_ssts, read_manifest
from weir.state.keygroups import KeyGroupRange
from weir.state.objectstore import S3Bucket, storage_location

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
BACKFILL_S = 300.0


Place = ClusterPlace


@pytest.fixture(scope="module")
def place(
    spark_cluster: SparkCluster, module_s3: S3Place, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Place]:
    yield from cluster_place(spark_cluster, module_s3, tmp_path_factory, "cluster-backfill")


def _job(place: Place, name: str, lines: list[str]) -> Path:
    src = write_lines(place.root / f"{name}.jsonl", lines)
    path = place.root / f"{name}.py"
    path.write_text(
        job_text(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, name=name)
    )
    return path


def _backfill(run_weir: Any, place: Place, job: Path, src: Path, *flags: str) -> dict[str, Any]:
    # PySpark's pandas notice would be an error here: weir backfill prints none (issue 39)
    env = {**place.s3.env, "PYTHONWARNINGS": "error::FutureWarning"}
    r: WeirResult = run_weir(
        "backfill", str(job), "--input", str(src), *flags, env=env, timeout=BACKFILL_S
    )
    assert r.rc == 0, r.stderr[-3000:]
    summary: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return summary


def _windows(server: WeirServer, key: str) -> list[dict[str, Any]]:
    r = server.client().get(f"/{server.job}/imps/state/{quote(key, safe='')}?limit=10000")
    assert r.status_code == 200, (key, r.text)
    windows: list[dict[str, Any]] = r.json()["windows"]
    return windows


def test_cluster_backfill_to_s3_restores_the_models_windows(
    place: Place,
    spark_cluster: SparkCluster,
    run_weir: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = event_lines(make_events(3_000, seed=91))
    lines.insert(100, "{not json")
    ref = simulate(lines, SPEC)
    assert len(ref.late) >= 20, "the history must have late records"
    assert len(ref.dead) == 1
    job = _job(place, "cb", lines)
    work = f"{place.s3.url}/work"
    summary = _backfill(
        run_weir, place, job, place.root / "cb.jsonl", "--master", place.master,
        "--work-dir", work, "--into-savepoint", f"{place.s3.url}/sp", "--parallelism", "2",
    )  # fmt: skip
    assert summary["backfill"]["imps"]["sst_dir"] == f"{work}/cb/imps/sst"
    assert summary["backfill"]["imps"]["late"] == len(ref.late)  # the tasks' stats, read from S3
    assert summary["backfill"]["imps"]["dead"] == 1
    assert summary["backfill"]["imps"]["windows"] == len(ref.windows)
    savepoint = summary["savepoint"]
    assert savepoint.startswith(f"{place.s3.url}/sp/cb/chk-"), savepoint

    # every key group's file is in S3 as the manifest says, the dead letter beside them, and
    # no file on an executor's disk
    for name, value in place.s3.env.items():
        monkeypatch.setenv(name, value)
    sst = storage_location(f"{work}/cb/imps/sst")
    listed = read_manifest(S3Bucket(sst))
    assert {f.key_group for f in listed.values()} == {
        zlib.crc32(key.encode()) % 128 for key, _, _ in ref.windows
    }
    fetched = fetch_ssts(sst, KeyGroupRange(0, 127), tmp_path / "all")  # checks each CRC-32
    assert sorted(p.name for _, p in fetched) == sorted(listed)
    dead = S3Bucket(storage_location(f"{work}/cb/imps"))  # the operator's own folder
    (letters,) = [k for k in dead.sizes("dead")]
    assert json.loads(dead.get_bytes(letters))["input"] == "{not json"
    left = [p for d in (spark_cluster.base_dir, place.root) for p in d.rglob("kg-*.sst")]
    assert left == [], left[:3]

    empty = write_lines(place.root / "empty.jsonl", [])
    server = place.servers.start(
        job, "--restore", savepoint, "--source", f"file://{empty}", "--parallelism", "2",
        state_dir=place.root / "restored", env=place.s3.env, timeout=60.0,
    )  # fmt: skip
    server.wait_finished(60.0)
    for key, windows in ref.state_by_key().items():
        assert _windows(server, key) == windows, key
    assert server.stop() == 0, server.stderr()


def test_live_backfill_from_s3_into_a_cluster_job(
    place: Place, run_weir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = event_lines(make_events(2_000, seed=92))  # event times from about -3 s to 7 s
    live = event_lines(make_events(800, seed=93, start=60_000))  # a minute later
    hist_src = write_lines(place.root / "history.jsonl", history)
    job = _job(place, "cl", live)
    root = f"{place.s3.url}/backfills"
    server = place.servers.start(
        job, "--master", place.master, "--parallelism", "2",
        "--checkpoint-dir", f"{place.s3.url}/chk", "--backfill-dir", root,
        "--state-retention-ms", "86400000",
        state_dir=place.root / "live-state", env=place.s3.env, timeout=START_S,
    )  # fmt: skip
    server.wait_finished(90.0)
    live_ref = simulate(live, SPEC).state_by_key()
    assert _windows(server, "ad-0") == live_ref["ad-0"]

    # outside the job's backfill storage: another prefix, a sibling whose name merely starts
    # alike, a directory; each refused with both named, nothing loaded
    url = f"{server.base_url}/jobs/{server.job}/backfills"
    for path in (f"{place.s3.url}/elsewhere/cl/sst", f"{root}2/cl/sst", str(place.root)):
        body = {"op": "imps", "path": path, "min_end": 0, "max_end": 1}
        r = httpx.post(url, json=body, timeout=30.0, trust_env=False)
        assert r.status_code == 400, (path, r.text)
        message = r.json()["error"]["message"]
        assert path in message and root in message, message

    summary = _backfill(
        run_weir, place, job, hist_src, "--master", "local[2]", "--work-dir", root,
        "--live", server.base_url,
    )  # fmt: skip
    assert summary["live"]["imps"]["windows"] == summary["backfill"]["imps"]["windows"] > 0
    hist_ref = simulate(history, SPEC).state_by_key()
    for key in sorted(set(hist_ref) | set(live_ref)):
        assert _windows(server, key) == hist_ref.get(key, []) + live_ref.get(key, []), key

    # an object changed after the backfill wrote it: its task refuses it by the manifest's
    # CRC-32 (before any overlap check), and nothing is loaded
    for name, value in place.s3.env.items():
        monkeypatch.setenv(name, value)
    sst = S3Bucket(storage_location(summary["backfill"]["imps"]["sst_dir"]))
    victim = sorted(read_manifest(sst))[0]
    data = bytearray(sst.get_bytes(victim))
    data[-1] ^= 0xFF
    sst.put_bytes(victim, bytes(data))
    sst_dir = summary["backfill"]["imps"]["sst_dir"]
    body = {"op": "imps", "path": sst_dir, "min_end": 0, "max_end": 1}
    r = httpx.post(url, json=body, timeout=120.0, trust_env=False)
    assert r.status_code == 409, r.text
    assert f"{victim} has" in r.json()["error"]["message"]
    assert "CRC-32" in r.json()["error"]["message"]
    assert len(server.client().get(f"/jobs/{server.job}").json()["backfills"]) == 1
    assert server.stop() == 0, server.stderr()  # its executors free their cores


def test_an_unreachable_master_is_named_before_spark_starts(
    run_weir: Any, job_file: Path, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    r: WeirResult = run_weir(
        "backfill", str(job_file), "--input", str(job_file.parent / "in.jsonl"),
        "--master", master, "--work-dir", str(tmp_path / "work"),
        "--into-savepoint", str(tmp_path / "sp"), timeout=60,
    )  # fmt: skip
    assert r.rc == 2, r.stderr
    assert f"cannot reach the Spark master at {master}: connection refused" in r.stderr
    assert "every executor and this driver must mount it at the same path" in r.stderr
    assert not (tmp_path / "work" / "t1").exists()
