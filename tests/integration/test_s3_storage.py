"""Checkpoint storage on a real S3-compatible server (SeaweedFS on loopback), used directly:
uploads of real RocksDB checkpoints, the listing of complete checkpoints, validation, restores
with and without the local SST cache, a damaged object caught by its CRC after download,
retention and garbage collection of shared objects (savepoints kept), and the one-line errors
for an unknown bucket, a wrong secret key and a closed endpoint port.

The objects left after retention are listed with a client of the test's own
(``S3Server.objects``, not weir's store), so that the check does not trust the code it checks.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict

from tests.support.broker import free_port
from tests.support.s3_server import SECRET_KEY
from tests.support.servers import S3Place
from tests.unit.test_checkpoint_storage import _key, _take
from weir.base.errors import StorageError
from weir.state.checkpoints import METADATA, CheckpointStorage, FileRef
from weir.state.keygroups import KeyGroupRange
from weir.state.rocksdb import RocksState

EVERYTHING = KeyGroupRange(0, 127)
RESTORE = re.compile(
    r"restore chk=(\d+) worker=0 files=(\d+) downloaded=(\d+) bytes=(\d+) local=(\d+)"
)


@pytest.fixture
def storage(s3: S3Place, monkeypatch: pytest.MonkeyPatch) -> CheckpointStorage:
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    chk = CheckpointStorage(s3.url, "j")
    chk.ensure()
    return chk


def _restores(caplog: pytest.LogCaptureFixture) -> list[tuple[int, ...]]:
    found = (RESTORE.search(r.getMessage()) for r in caplog.records)
    return [tuple(int(g) for g in m.groups()) for m in found if m]


def _read_all(path: Path) -> dict[bytes, bytes]:
    db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return {bytes(k): bytes(v) for k, v in db.items()}  # type: ignore[arg-type]  # raw mode
    finally:
        db.close()


def test_checkpoints_upload_list_validate_and_restore_from_s3(
    storage: CheckpointStorage,
    s3: S3Place,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = RocksState(tmp_path / "db")
    want = {_key(i % 128, i): b"v%d" % i for i in range(20_000)}
    db.write(want)
    files, copied = _take(db, storage, tmp_path, 1, 0, {}, EVERYTHING)
    assert copied == sum(f.size for f in files) > 0
    assert storage.ids() == [1] and storage.next_id() == 2
    assert storage.where == f"{s3.url}/j" and storage.location(1) == f"{s3.url}/j/chk-1"
    assert storage.problem(1) is None
    # objects of a checkpoint without _metadata: it does not exist, but its id is taken
    storage.store.put_bytes("j/chk-2/w0/MANIFEST-000001", b"half")
    assert storage.ids() == [1] and storage.next_id() == 3
    db.close()

    caplog.set_level(logging.INFO, logger="weir.state.checkpoints")
    plain = tmp_path / "plain"
    storage.materialize(1, 0, files, plain)
    assert _read_all(plain) == want
    ssts = sum(1 for f in files if f.shared)
    cache = tmp_path / "sst-cache"
    storage.materialize(1, 0, files, tmp_path / "first", cache)
    storage.materialize(1, 0, files, tmp_path / "again", cache)
    assert _read_all(tmp_path / "again") == want
    without, first, again = _restores(caplog)
    assert without[2] == len(files) and without[3] == copied
    assert first[2] == len(files) and first[4] == 0
    # the second restore downloads only the per-checkpoint files; every SST comes from the cache
    assert again[2] == len(files) - ssts and again[4] == ssts > 0, again


def test_a_damaged_missing_or_resized_object_is_a_clear_problem(
    storage: CheckpointStorage, tmp_path: Path
) -> None:
    db = RocksState(tmp_path / "db")
    db.write({_key(i % 128, i): b"x" * 50 for i in range(5_000)})
    files, _ = _take(db, storage, tmp_path, 1, 0, {}, EVERYTHING)
    db.close()
    sst = next(f for f in files if f.shared)
    key = storage.key_of(1, 0, sst)
    good = storage.store.get_bytes(key)

    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0xFF
    storage.store.put_bytes(key, bytes(flipped))
    # same size: the listing cannot tell, the download does
    assert storage.problem(1) is None
    with pytest.raises(StorageError, match=rf"object s3://.*/{key} fails its CRC-32 check after "
                       r"download; the checkpoint is damaged: restore an older one"):  # fmt: skip
        storage.materialize(1, 0, files, tmp_path / "restored", tmp_path / "cache")
    assert not (tmp_path / "cache" / str(sst.shared)).exists(), "a damaged copy was cached"

    storage.store.put_bytes(key, good + b"tail")
    assert storage.problem(1) == (
        f"object {storage.store.url}/{key} has {sst.size + 4} bytes, not {sst.size}"
    )
    assert storage.latest_valid() is None
    storage.store.delete([key])
    assert storage.problem(1) == f"object {storage.store.url}/{key} is missing"


def test_retention_on_s3_leaves_exactly_the_retained_checkpoints_objects(
    storage: CheckpointStorage, s3: S3Place, tmp_path: Path
) -> None:
    db = RocksState(tmp_path / "db")
    cache = tmp_path / "sst-cache"
    known: dict[str, FileRef] = {}
    taken: dict[int, list[FileRef]] = {}
    for n in range(1, 6):
        db.write({_key(n, i): b"x%d" % n for i in range(2_000)})
        local = tmp_path / f"local-{n}"
        db.checkpoint(local)
        files, _ = storage.upload(local, n, 0, f"run-{n}", known, cache)
        taken[n] = files
        if n != 3:  # checkpoint 3 is aborted: its files are uploaded, its _metadata never is
            meta = {
                "id": n,
                "savepoint": n == 2,
                "workers": [
                    {"index": 0, "key_groups": EVERYTHING.to_json(),
                     "files": [f.to_json() for f in files]}
                ],
            }  # fmt: skip
            storage.write_metadata(n, meta)
            known = {f.name: f for f in files if f.shared}
    db.close()
    assert storage.ids() == [1, 2, 4, 5]

    assert storage.retain(1, cache) == [1, 3, 4]
    assert storage.ids() == [2, 5]
    expected = {f"j/chk-{n}/{METADATA}" for n in (2, 5)} | {
        storage.key_of(n, 0, f) for n in (2, 5) for f in taken[n]
    }
    listed = s3.server.objects(s3.prefix)
    assert set(listed) == expected, set(listed) ^ expected
    sizes = {storage.key_of(n, 0, f): f.size for n in (2, 5) for f in taken[n]}
    assert all(listed[k] == size for k, size in sizes.items())
    # the local copies follow: exactly the shared files still referenced
    assert {p.name for p in cache.iterdir()} == {
        str(f.shared) for n in (2, 5) for f in taken[n] if f.shared
    }
    for n in (2, 5):
        assert storage.problem(n) is None


@pytest.mark.parametrize(
    ("change", "url", "message"),
    [
        (
            {},
            "s3://no-such-bucket-weir/p",
            r"cannot list s3://no-such-bucket-weir/p/j: the bucket does not exist at "
            r"http://127\.0\.0\.1:\d+: create it, or fix the bucket name",
        ),
        (
            {"AWS_SECRET_ACCESS_KEY": "wrong-secret-do-not-print"},
            None,
            r"cannot list s3://weir/.*/j: access denied: check AWS_ACCESS_KEY_ID / "
            r"AWS_SECRET_ACCESS_KEY and that they may read and write this bucket and prefix",
        ),
        (
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:{port}"},
            None,
            r"cannot list s3://weir/.*/j: cannot reach http://127\.0\.0\.1:\d+: check "
            r"AWS_ENDPOINT_URL \(scheme, host and port\) and that the server is up",
        ),
    ],
    ids=["unknown-bucket", "wrong-secret", "closed-port"],
)
def test_storage_errors_are_one_line_naming_the_url_and_what_to_check(
    s3: S3Place,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, str],
    url: str | None,
    message: str,
) -> None:
    env = {**s3.env, **{k: v.format(port=free_port()) for k, v in change.items()}}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StorageError, match=rf"^{message}$") as info:
        CheckpointStorage(url or s3.url, "j").ensure()
    text = str(info.value)
    assert "\n" not in text and SECRET_KEY not in text and "do-not-print" not in text
