"""Checkpoint storage on real RocksDB files: incremental uploads, retention with reference-counted
shared files, validation of broken checkpoints, and restores that re-cut key-group ranges."""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.support import chk_dir, shared_dir
from weir.engine.runtime.operators.cellwrites import CellLog, CellPart
from weir.engine.runtime.operators.delta import StateDelta
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange, range_for_operator
from weir.state.layout import key_group_bounds
from weir.state.restore import restore_worker_db
from weir.state.rocksdb import RocksState


def _key(kg: int, i: int) -> bytes:
    return struct.pack(">HI", kg, i)


def _take(
    db: RocksState,
    storage: CheckpointStorage,
    tmp: Path,
    n: int,
    worker: int,
    known: dict[str, FileRef],
    kgs: KeyGroupRange,
    savepoint: bool = False,
) -> tuple[list[FileRef], int]:
    local = tmp / f"local-{worker}-{n}"
    db.checkpoint(local)
    files, copied = storage.upload(local, n, worker, f"run-w{worker}", known)
    shutil.rmtree(local)
    storage.write_metadata(
        n,
        {
            "id": n,
            "savepoint": savepoint,
            "max_parallelism": 128,
            "workers": [
                {
                    "index": worker,
                    "key_groups": kgs.to_json(),
                    "files": [f.to_json() for f in files],
                }
            ],
        },
    )
    return files, copied


def test_a_checkpoint_after_updating_1_percent_of_1m_keys_uploads_a_small_fraction(
    tmp_path: Path,
) -> None:
    db = RocksState(tmp_path / "db")
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    value = b"v" * 24
    for start in range(0, 1_000_000, 50_000):
        db.write({_key(i % 128, i): value for i in range(start, start + 50_000)})
    everything = KeyGroupRange(0, 127)
    files, first = _take(db, storage, tmp_path, 1, 0, {}, everything)
    assert first > 5_000_000  # 1M keys, compressed
    known = {f.name: f for f in files if f.shared}
    db.write({_key(i % 128, i): b"w" * 24 for i in range(0, 1_000_000, 100)})  # 10k keys
    files2, second = _take(db, storage, tmp_path, 2, 0, known, everything)
    assert second < first * 0.05, (second, first)
    assert {f.shared for f in files if f.shared} & {f.shared for f in files2 if f.shared}
    # keep one checkpoint: files only checkpoint 1 used disappear, checkpoint 2 stays whole
    assert storage.retain(1) == [1]
    assert not chk_dir(storage, 1).exists()
    stored = {p.name for p in shared_dir(storage).iterdir()}
    assert stored == {f.shared for f in files2 if f.shared}
    assert storage.problem(2) is None
    db.close()


def test_retention_keeps_savepoints_and_drops_aborted_checkpoints(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    everything = KeyGroupRange(0, 127)
    known: dict[str, FileRef] = {}
    for n in range(1, 6):
        db.write({_key(n, i): b"x" for i in range(1000)})
        files, _ = _take(db, storage, tmp_path, n, 0, known, everything, savepoint=n == 2)
        known = {f.name: f for f in files if f.shared}
    (chk_dir(storage, 3) / "_metadata").unlink()  # as if checkpoint 3 never completed
    (chk_dir(storage, 6) / "w0").mkdir(parents=True)  # one in flight: newer than every complete
    assert storage.ids() == [1, 2, 4, 5]
    assert storage.retain(2) == [1, 3]
    assert storage.ids() == [2, 4, 5]
    assert chk_dir(storage, 6).exists()
    assert storage.next_id() == 7
    for n in storage.ids():
        assert storage.problem(n) is None, n
    assert [c["id"] for c in storage.summaries()] == [5, 4, 2]
    db.close()


def test_problems_name_the_missing_file_the_bad_checksum_and_the_missing_metadata(
    tmp_path: Path,
) -> None:
    db = RocksState(tmp_path / "db")
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    db.write({_key(1, i): b"x" * 100 for i in range(5000)})
    files, _ = _take(db, storage, tmp_path, 1, 0, {}, KeyGroupRange(0, 127))
    db.write({_key(2, i): b"y" * 100 for i in range(5000)})
    files2, _ = _take(
        db, storage, tmp_path, 2, 0, {f.name: f for f in files if f.shared}, KeyGroupRange(0, 127)
    )
    new = [f for f in files2 if f.shared and f.shared not in {g.shared for g in files}]
    assert new
    path = shared_dir(storage) / str(new[0].shared)
    raw = bytearray(path.read_bytes())
    raw[10] ^= 0x01
    path.write_bytes(bytes(raw))
    assert "fails its CRC-32 check" in str(storage.problem(2))
    assert storage.latest_valid() == 1
    path.unlink()
    assert f"{path} is missing" in str(storage.problem(2))
    (chk_dir(storage, 1) / "_metadata").write_text("{not json")
    assert "unreadable _metadata" in str(storage.problem(1))
    assert storage.latest_valid() is None
    db.close()


def _two_worker_checkpoint(tmp_path: Path) -> tuple[CheckpointStorage, dict[str, Any], set[bytes]]:
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    workers = []
    every: set[bytes] = set()
    for w in range(2):
        kgs = range_for_operator(128, 2, w)
        db = RocksState(tmp_path / f"w{w}")
        rows = {_key(kg, i): f"{kg}:{i}".encode() for kg in kgs for i in range(40)}
        db.write(rows)
        every |= set(rows)
        local = tmp_path / f"local-{w}"
        db.checkpoint(local)
        files, _ = storage.upload(local, 1, w, f"run-w{w}", {})
        workers.append(
            {"index": w, "key_groups": kgs.to_json(), "files": [f.to_json() for f in files]}
        )
        db.close()
    meta = {"id": 1, "max_parallelism": 128, "parallelism": 2, "workers": workers}
    storage.write_metadata(1, meta)
    return storage, meta, every


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_restore_at_any_parallelism_holds_exactly_its_key_groups(tmp_path: Path, p: int) -> None:
    storage, meta, every = _two_worker_checkpoint(tmp_path)
    seen: set[bytes] = set()
    for i in range(p):
        kgs = range_for_operator(128, p, i)
        target = tmp_path / f"restored-{p}-{i}"
        known = restore_worker_db(storage, 1, json.loads(json.dumps(meta)), kgs, target)
        assert bool(known) == (p == 2)  # same ranges: the files are shared, not rewritten
        db = RocksState(target)
        lo, hi = key_group_bounds(0, 127)
        rows = dict(db.scan(lo, hi))
        db.close()
        assert all(int.from_bytes(k[:2], "big") in kgs for k in rows), (p, i)
        assert all(rows[k] == f"{k[0] * 256 + k[1]}:{int.from_bytes(k[2:], 'big')}".encode()
                   for k in rows)  # fmt: skip
        assert not seen & set(rows)
        seen |= set(rows)
    assert seen == every


def test_cells_after_updating_1_percent_of_1m_keys_checkpoint_a_small_fraction(
    tmp_path: Path,
) -> None:
    """The same goal with windows as cells (``state/cells.py``): 1M keys of one open window,
    written in ten flushes, then 1% of them changed, as ``WindowRuntime`` writes generations."""
    db = RocksState(tmp_path / "db")
    storage = CheckpointStorage(tmp_path / "chk", "j")
    storage.ensure()
    log = CellLog(128)
    keys = [f"ad-{i}" for i in range(1_000_000)]

    def flush(chosen: list[str], value: int) -> None:
        flat = [v for _ in chosen for v in (value, value * 0.5)]
        StateDelta(cells=CellPart(log, 7, 2, [(7, 10_000, chosen, flat)])).write(db, 100_000)

    for start in range(0, len(keys), 100_000):
        flush(keys[start : start + 100_000], 1)
    everything = KeyGroupRange(0, 127)
    files, first = _take(db, storage, tmp_path, 1, 0, {}, everything)
    assert first > 5_000_000  # 1M rows, compressed
    known = {f.name: f for f in files if f.shared}
    flush(random.Random(3).sample(keys, 10_000), 2)  # 1% of the keys
    _, second = _take(db, storage, tmp_path, 2, 0, known, everything)
    assert second < first * 0.05, (second, first)
    db.close()
