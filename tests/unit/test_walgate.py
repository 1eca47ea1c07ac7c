"""A worker's RocksDB writes its WAL only once a reader follows it (``state.walgate``): a reader
that attaches later still reads every write, before and after; a restart that removed the
readers' directory is followed; "never" and "always" do what they say; a closed primary is read
whole without one."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from weir.base.errors import StateError
from weir.base.files import remove_tree
from weir.state import walgate
from weir.state.rocksdb import RocksState
from weir.state.rocksopts import RocksOptions
from weir.state.secondary import SecondaryReader


def _wal_bytes(db: Path) -> int:
    return sum(f.stat().st_size for f in db.glob("*.log"))


def test_a_primary_nobody_reads_writes_no_wal(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    try:
        for i in range(200):
            db.write({f"k{i}".encode(): b"v" * 100})
        assert _wal_bytes(tmp_path / "db") == 0
        assert not walgate.acknowledged(tmp_path / "db")
    finally:
        db.close()


def test_a_reader_that_attaches_later_reads_every_write_before_and_after(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        # written before the reader existed: unlogged, in the memtable only
        before = {f"k{i}".encode(): b"old" for i in range(50)}
        db.write(before)
        assert _wal_bytes(tmp_path / "db") == 0
        reader.get(b"k0")  # attach: the worker starts its WAL and flushes first
        assert walgate.acknowledged(tmp_path / "db")
        assert dict(reader.scan(b"k", b"l")) == before
        db.write({b"k1": b"new", b"z": b"after"})
        assert _wal_bytes(tmp_path / "db") > 0
        assert reader.get(b"k1") == b"new" and reader.get(b"z") == b"after"
    finally:
        reader.close()
        db.close()


def test_the_readers_meeting_place_is_private_to_the_user(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"
        where = walgate.readers_dir(tmp_path / "db")
        assert stat.S_IMODE(where.stat().st_mode) == 0o700
        assert {stat.S_IMODE(f.stat().st_mode) for f in where.iterdir()} == {0o600}
    finally:
        reader.close()
        db.close()


def test_a_restart_that_removed_the_readers_directory_is_followed(tmp_path: Path) -> None:
    """A job manager's restart removes the workers' directories; the new worker opens without
    a WAL (nobody announced), and the reader announces itself again at its next read."""
    first = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        first.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"
        first.close()
        shutil.rmtree(tmp_path / "db")
        shutil.rmtree(walgate.readers_dir(tmp_path / "db"))
        second = RocksState(tmp_path / "db")
        try:
            second.write({b"b": b"2"})  # unlogged: nobody has announced itself to this one
            assert reader.get(b"b") == b"2"
            assert reader.get(b"a") is None  # the first worker's state went with its files
            second.write({b"c": b"3"})
            assert reader.get(b"c") == b"3"
        finally:
            second.close()
    finally:
        reader.close()


def test_never_reads_what_was_flushed_and_always_logs_from_the_start(tmp_path: Path) -> None:
    quiet = RocksState(tmp_path / "quiet", RocksOptions(wal="never"))
    loud = RocksState(tmp_path / "loud", RocksOptions(wal="always"))
    reader = SecondaryReader(tmp_path / "quiet", tmp_path / "secondary", catch_up_ms=0)
    try:
        quiet.write({b"a": b"1"})
        loud.write({b"a": b"1"})
        assert _wal_bytes(tmp_path / "quiet") == 0 and _wal_bytes(tmp_path / "loud") > 0
        assert reader.get(b"a") is None  # in the memtable, unlogged
        quiet.flush()
        assert reader.get(b"a") == b"1"
    finally:
        reader.close()
        quiet.close()
        loud.close()
    with pytest.raises(StateError, match="write-ahead log mode 'sometimes'"):
        RocksOptions(wal="sometimes")


def test_a_closed_primary_is_read_whole_without_a_wal(tmp_path: Path) -> None:
    """``weir api`` of a stopped job: RocksDB flushed what it wrote unlogged as it closed."""
    db = RocksState(tmp_path / "db")
    db.write({b"a": b"1"})
    db.close()
    assert walgate.acknowledged(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        assert reader.get(b"a") == b"1"
    finally:
        reader.close()


def test_a_reader_of_a_worker_that_never_answers_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walgate, "ACK_WAIT_S", 0.2)
    db = RocksState(tmp_path / "db")
    db.write({b"a": b"1"})
    monkeypatch.setattr(walgate, "wanted", lambda primary: False)  # a worker that never looks
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        with pytest.raises(StateError, match="has not started its write-ahead log for readers"):
            reader.get(b"a")
    finally:
        reader.close()
        db.close()


def test_a_worker_directory_is_removed_while_a_reader_announces_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job manager's ``remove_tree`` of a worker's directory tries again when a reader
    announced itself into it meanwhile (``rmtree`` then fails: the directory is not empty),
    and a reader never makes a worker's directory that is not there."""
    worker = tmp_path / "worker-0"
    (worker / "db").mkdir(parents=True)
    real = shutil.rmtree
    calls = []

    def racing(path: Path, *args: object, **kwargs: object) -> None:
        calls.append(path)
        if len(calls) == 1:  # the reader announces itself while the first removal runs
            walgate.announce(worker / "db")
            raise OSError(39, "Directory not empty", str(path))
        real(path)

    monkeypatch.setattr(shutil, "rmtree", racing)
    remove_tree(worker)
    assert len(calls) == 2 and not worker.exists()
    walgate.announce(worker / "db")  # the directory is gone: nothing is made
    assert not worker.exists()
    remove_tree(worker)  # and removing what is not there is no error


def test_a_checkpoint_of_a_primary_nobody_reads_holds_every_write(tmp_path: Path) -> None:
    """Exactly-once rests on checkpoints, not the WAL: RocksDB's checkpoint flushes what was
    written unlogged into the files it links."""
    db = RocksState(tmp_path / "db")
    try:
        db.write({f"k{i}".encode(): str(i).encode() for i in range(100)})
        assert _wal_bytes(tmp_path / "db") == 0
        db.checkpoint(tmp_path / "chk")
    finally:
        db.close()
    copy = RocksState(tmp_path / "chk")
    try:
        assert dict(copy.scan(b"k", b"l")) == {
            f"k{i}".encode(): str(i).encode() for i in range(100)
        }
    finally:
        copy.close()


def test_an_answer_left_by_an_earlier_primary_of_the_files_is_not_taken(tmp_path: Path) -> None:
    """A primary that closed left ``logging``; one opened on the same files without a reader
    writes unlogged, so a reader waits for its own answer and still reads every write."""
    first = RocksState(tmp_path / "db")
    first.close()
    assert walgate.acknowledged(tmp_path / "db")
    again = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        again.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"
        again.write({b"b": b"2"})
        assert reader.get(b"b") == b"2"
    finally:
        reader.close()
        again.close()


def test_a_reader_made_and_never_read_changes_nothing(tmp_path: Path) -> None:
    """A second ``weir run`` refused on the state directory's lock builds its API's readers of
    the running job's workers and never reads: the running worker must not be told to log
    (nor flush a new file), so a reader announces itself at its first read, not when made."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        db.write({b"a": b"1"})
        assert not walgate.wanted(tmp_path / "db")
        assert not walgate.readers_dir(tmp_path / "db").exists()
        assert reader.get(b"a") == b"1"  # the first read announces it
        assert walgate.wanted(tmp_path / "db")
    finally:
        reader.close()
        db.close()
