"""Checkpoint durability (issue 17, item 10): retention never deletes a savepoint nor a
checkpoint whose ``_metadata`` it cannot read (it says so, and keeps every shared file such a
checkpoint may need), and a checkpoint's files, ``_metadata`` and their names reach the disk in
an order a crash cannot break: shared files, ``shared/``, ``_metadata``, ``chk-<n>/``, the
job's directory."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import chk_dir, shared_dir
from weir.state.checkpoints import METADATA, CheckpointStorage, FileRef
from weir.state.rocksdb import RocksState


def _checkpoint(
    storage: CheckpointStorage, db: RocksState, n: int, work: Path, **extra: Any
) -> None:
    """Checkpoint ``n`` of ``db`` (one worker), after a write of its own, as the job does."""
    db.write({f"key-{n}".encode(): b"v" * 100})
    local = work / f"local-{n}"
    db.checkpoint(local)
    refs, _ = storage.upload(local, n, 0, f"r-{n}", {})
    meta = {"id": n, "workers": [{"index": 0, "files": [r.to_json() for r in refs]}], **extra}
    storage.write_metadata(n, meta)


def _shared_of(storage: CheckpointStorage, n: int) -> set[str]:
    meta = json.loads((chk_dir(storage, n) / METADATA).read_bytes())
    return {FileRef.from_json(f).shared or "" for f in meta["workers"][0]["files"]} - {""}


def test_retention_keeps_savepoints_and_unreadable_checkpoints(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = CheckpointStorage(tmp_path / "chk", "t1")
    storage.ensure()
    db = RocksState(tmp_path / "db")
    try:
        _checkpoint(storage, db, 1, tmp_path, savepoint=True)
        for n in range(2, 6):
            _checkpoint(storage, db, n, tmp_path)
    finally:
        db.close()
    savepoint_files = _shared_of(storage, 1)
    corrupt = chk_dir(storage, 2) / METADATA
    needed = _shared_of(storage, 2)
    corrupt.write_bytes(b'{"id": 2, "workers": [')  # torn, as by a disk that lost its tail

    with caplog.at_level(logging.WARNING, logger="weir.state.checkpoints"):
        deleted = storage.retain(1)

    assert deleted == [3, 4]
    assert storage.ids() == [1, 2, 5]
    assert corrupt.read_bytes() == b'{"id": 2, "workers": ['
    kept = {f.name for f in shared_dir(storage).iterdir()}
    assert savepoint_files <= kept and needed <= kept  # whatever chk-2 may reference stays
    assert str(chk_dir(storage, 2)) in caplog.text and "cannot read" in caplog.text
    assert storage.latest_valid() == 5

    # once the owner removes the broken one, the files nobody references go
    corrupt.unlink()
    storage.retain(1)
    assert {f.name for f in shared_dir(storage).iterdir()} == savepoint_files | _shared_of(
        storage, 5
    )
    assert storage.ids() == [1, 5]


def test_retention_keeps_a_checkpoint_whose_metadata_is_not_an_object(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path / "chk", "t1")
    storage.ensure()
    db = RocksState(tmp_path / "db")
    try:
        for n in range(1, 4):
            _checkpoint(storage, db, n, tmp_path)
    finally:
        db.close()
    (chk_dir(storage, 1) / METADATA).write_text('["a list, not a checkpoint"]')
    assert storage.retain(1) == [2]
    assert storage.ids() == [1, 3]


def test_a_checkpoint_reaches_the_disk_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is synced, in order: every file's data before any name that points at it, and
    ``_metadata`` (which makes the checkpoint exist) after everything it lists."""
    storage = CheckpointStorage(tmp_path / "chk", "t1")
    storage.ensure()
    db = RocksState(tmp_path / "db")
    db.write({b"k": b"v"})
    db.checkpoint(tmp_path / "local")
    db.close()
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    refs, _ = storage.upload(tmp_path / "local", 1, 0, "r", {})
    storage.write_metadata(1, {"id": 1, "workers": [{"index": 0, "files": []}]})

    base, chk = storage.where, str(chk_dir(storage, 1))
    shared = [i for i, p in enumerate(synced) if p.startswith(f"{shared_dir(storage)}/")]
    assert shared and any(r.shared for r in refs)
    assert synced.index(str(shared_dir(storage))) > max(shared)
    # _metadata's bytes go to a temporary name (create-only: then hard-linked), so the file
    # synced is that temporary one; after it only names: chk-<n>'s (the link) and the job's
    meta = next(i for i, p in enumerate(synced) if p.startswith(f"{chk}/.") and METADATA in p)
    assert meta > synced.index(str(chk_dir(storage, 1) / "w0"))
    after = synced[meta + 1 :]
    assert after[-1] == base and after[:-1] and set(after[:-1]) == {chk}, after
