"""The conditional writes the job's lease and every ``_metadata`` rely on, against the stores a
user meets: a local directory and a real S3-compatible server (SeaweedFS on loopback, which
honours ``If-None-Match: *`` and ``If-Match``).

Races are run by real processes (``RACERS`` of them, released together by a file that appears
once all are waiting): of several creating one object exactly one wins, and of several
replacing one version exactly one wins; a loser gets ``StorageConflict`` and wrote nothing.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.servers import S3Place
from weir.base.errors import StorageConflict, StorageError
from weir.state import objectstore
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import Holder, LeaderRecord, LeaseStore, newest_epoch
from weir.state.objectstore import open_store

RACERS = 4
RACE = """
import os, sys, time
from pathlib import Path
from weir.base.errors import StorageConflict
from weir.state.objectstore import open_store

url, key, go, me, version = sys.argv[1:6]
store = open_store(url)
Path(f"{go}.{me}").touch()
while not Path(go).exists():
    time.sleep(0.001)
try:
    if version == "-":
        store.put_new(key, me.encode())
    else:
        store.put_if(key, me.encode(), version)
except StorageConflict:
    print("lost")
else:
    print("won")
"""


@pytest.fixture(params=["dir", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A checkpoint storage URL: a local directory, or a fresh prefix on the S3 server."""
    if request.param == "dir":
        return str(tmp_path / "chk")
    s3: S3Place = request.getfixturevalue("s3")
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    return s3.url


def _race(where: str, key: str, go: Path, version: str | None) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, where, key, str(go), f"racer-{i}", version or "-"],
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for i in range(RACERS)
    ]
    ready = [Path(f"{go}.racer-{i}") for i in range(RACERS)]
    wait_until(lambda: all(r.exists() for r in ready), timeout=60)  # all at the start line
    go.touch()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        results.append(out.strip())
    return results


def test_create_only_and_replace_if_unchanged(where: str) -> None:
    store = open_store(where)
    v1 = store.put_new("j/leader", b"one")
    with pytest.raises(StorageConflict):
        store.put_new("j/leader", b"two")
    assert store.get_versioned("j/leader") == (b"one", v1)
    v2 = store.put_if("j/leader", b"three", v1)
    with pytest.raises(StorageConflict):
        store.put_if("j/leader", b"four", v1)  # a stale version: someone replaced it
    assert store.get_versioned("j/leader") == (b"three", v2)
    with pytest.raises(StorageConflict):
        store.put_if("j/absent", b"x", v2)
    assert store.get_versioned("j/absent") is None


def test_of_racing_creators_exactly_one_wins(where: str, tmp_path: Path) -> None:
    results = _race(where, "j/leader", tmp_path / "go-create", None)
    assert sorted(results) == ["lost"] * (RACERS - 1) + ["won"]
    data, _ = open_store(where).get_versioned("j/leader") or (b"", "")
    assert data == f"racer-{results.index('won')}".encode()


def test_of_racing_replacers_of_one_version_exactly_one_wins(where: str, tmp_path: Path) -> None:
    store = open_store(where)
    version = store.put_new("j/leader", b"first")
    results = _race(where, "j/leader", tmp_path / "go-replace", version)
    assert sorted(results) == ["lost"] * (RACERS - 1) + ["won"]
    data, _ = store.get_versioned("j/leader") or (b"", "")
    assert data == f"racer-{results.index('won')}".encode()


def test_a_metadata_is_never_replaced_by_another_writer(where: str) -> None:
    """A stale job manager writing checkpoint ``n`` after the leader did gets a conflict; the
    same bytes again (a retried PUT whose answer was lost) are accepted."""
    storage = CheckpointStorage(where, "j")
    storage.ensure()
    storage.write_metadata(1, {"checkpoint": 1, "epoch": 2})
    storage.write_metadata(1, {"checkpoint": 1, "epoch": 2})  # its own retry
    with pytest.raises(StorageConflict):
        storage.write_metadata(1, {"checkpoint": 1, "epoch": 1})
    assert storage.metadata(1)["epoch"] == 2


def test_the_lease_record_round_trips_and_a_new_one_starts_above_old_epochs(where: str) -> None:
    storage = CheckpointStorage(where, "j")
    storage.ensure()
    leases = LeaseStore(storage)
    assert leases.read() is None
    holder = Holder("run-1", "host", "node", 123, "/state", "1:2", None)
    record = LeaderRecord("j", 7, holder, 5000, time_ms=1)
    version = leases.create(record)
    assert leases.read() == (record, version)
    with pytest.raises(StorageConflict):
        leases.create(record)
    storage.store.put_bytes("j/chk-4/_metadata", b'{"checkpoint": 4, "epoch": 7}')
    assert newest_epoch(storage) == 7


def test_a_directory_replace_kept_out_by_a_held_lock_fails_clearly_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compare-and-replace in a directory writes its bytes before it takes the lock, which
    covers the compare and the rename alone. A writer kept out (a holder stopped inside that
    window) gets a ``StorageError`` that says why; a loser or a writer kept out leaves no file
    behind and the object as it was."""
    monkeypatch.setattr(objectstore, "LOCK_WAIT_S", 0.2)
    store = open_store(str(tmp_path / "chk"))
    version = store.put_new("j/leader", b"first")
    with pytest.raises(StorageConflict):
        store.put_if("j/leader", b"stale", "not-its-version")
    fd = os.open(tmp_path / "chk" / "j" / ".leader.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: another holder, as flock counts
        with pytest.raises(StorageError, match="stopped or paused in the middle of a write"):
            store.put_if("j/leader", b"second", version)
    finally:
        os.close(fd)
    assert store.get_versioned("j/leader") == (b"first", version)
    assert sorted(p.name for p in (tmp_path / "chk" / "j").iterdir()) == [".leader.lock", "leader"]
    store.put_if("j/leader", b"second", version)  # the lock free again: it goes through
    assert store.get_bytes("j/leader") == b"second"
