"""What only the RocksDB backend does, on real files: its own files stay bounded, opening
fails clearly, SST ingest, and the secondary reader. The state backend contract itself is
``tests/contract/``."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rocksdict import Options, SstFileWriter

from tests.support import wait_until
from weir.base.errors import StateError
from weir.state import layout, secondary
from weir.state.rocksdb import RocksState
from weir.state.rocksopts import RocksOptions
from weir.state.secondary import SecondaryReader


def _sst(path: Path, entries: dict[bytes, bytes]) -> Path:
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path))
    for k in sorted(entries):
        writer[k] = entries[k]
    writer.finish()
    return path


def test_ingest_adds_sst_files_whose_keys_replace_what_is_stored(tmp_path: Path) -> None:
    """The backfill's bulk load: SST files written with ``SstFileWriter``, one per key group."""
    db = RocksState(tmp_path / "db")
    try:
        db.write({b"\x00\x01kept": b"old", b"\x00\x02replaced": b"old"})
        db.ingest(
            [
                _sst(tmp_path / "kg1.sst", {b"\x00\x01new": b"1"}),
                _sst(tmp_path / "kg2.sst", {b"\x00\x02replaced": b"2"}),
            ]
        )
        assert list(db.scan(b"", b"\xff")) == [
            (b"\x00\x01kept", b"old"),
            (b"\x00\x01new", b"1"),
            (b"\x00\x02replaced", b"2"),
        ]
        assert (tmp_path / "kg1.sst").exists()  # copied in, not moved: the input stays whole
    finally:
        db.close()


def test_ingesting_a_file_that_is_not_an_sst_names_the_state(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sst"
    bad.write_bytes(b"not an sst file")
    db = RocksState(tmp_path / "db")
    try:
        with pytest.raises(StateError, match=f"ingesting 1 SST files into {tmp_path / 'db'}"):
            db.ingest([bad])
    finally:
        db.close()


def test_rocksdbs_own_files_stay_bounded_over_many_flushes(tmp_path: Path) -> None:
    """A checkpoint flushes every couple of seconds for months: the info LOG rolls and keeps a
    bounded number of old files, and the MANIFEST (copied into every checkpoint) starts again
    past its bound instead of gaining an edit per flush for ever."""
    opts = RocksOptions(log_file_kb=16, log_files_kept=2, manifest_kb=8)
    db = RocksState(tmp_path / "db", opts)
    try:
        for i in range(200):
            db.write({layout.state_key(1, 1, b"k%d" % (i % 50), 0): b"v%d" % i})
            db.flush()
        assert db.get(layout.state_key(1, 1, b"k49", 0)) == b"v199"
    finally:
        db.close()
    files = list((tmp_path / "db").iterdir())
    logs = [f for f in files if f.name == "LOG" or f.name.startswith("LOG.old")]
    manifests = [f for f in files if f.name.startswith("MANIFEST-")]
    assert len([f for f in logs if f.name != "LOG"]) <= 2, sorted(f.name for f in logs)
    assert sum(f.stat().st_size for f in logs) < 4 * 16 * 1024 + 64 * 1024
    assert len(manifests) == 1
    # one snapshot of the live files plus the edits since (without the bound: 55 KiB)
    assert manifests[0].stat().st_size < 16 * 1024, manifests[0].stat().st_size


def test_open_failure_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StateError, match=f"cannot open RocksDB state at {blocker / 'db'}"):
        RocksState(blocker / "db")


def test_second_primary_on_the_same_path_is_refused(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    try:
        with pytest.raises(StateError, match="not opened by another running job"):
            RocksState(tmp_path / "db")
    finally:
        db.close()


def test_secondary_reader_follows_the_primary(tmp_path: Path) -> None:
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    with pytest.raises(StateError, match="is not created yet"):
        reader.get(b"a")
    db = RocksState(tmp_path / "db")
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"
        db.write({b"b": b"2", b"c": b"3"}, [b"a"])
        wait_until(lambda: reader.get(b"b") == b"2", 5.0, what="the secondary to catch up")
        assert reader.get(b"a") is None
        assert reader.scan(b"a", b"z") == [(b"b", b"2"), (b"c", b"3")]
        assert reader.scan(b"a", b"z", limit=1) == [(b"b", b"2")]
    finally:
        reader.close()
        db.close()


def test_secondary_reader_never_keeps_a_value_the_primary_flushed_over(tmp_path: Path) -> None:
    """RocksDB's secondary answers from the entries it replayed from a WAL even after the
    primary flushed newer values and deleted that WAL (facebook/rocksdb#15051); the reader
    reopens then, and the instance it replaces goes once the next one is replaced."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        db.write({b"k": b"v1", b"cold": b"c1"})
        assert reader.get(b"k") == b"v1" and reader.get(b"cold") == b"c1"  # from the WAL
        db.write({b"k": b"v2", b"cold": b"c2"})
        db.flush()  # v2 and c2 go to an SST file; the WAL holding v1 and c1 is deleted
        assert reader.get(b"cold") == b"c2"  # RocksDB alone would answer c1 until new writes
        assert reader.get(b"k") == b"v2" and reader.reopened == 1
        db.write({b"k": b"v3"})
        db.flush()
        assert reader.get(b"k") == b"v3" and reader.reopened == 2
        assert sorted(p.name for p in (tmp_path / "secondary").iterdir()) == ["s2", "s3"]
    finally:
        reader.close()
        db.close()
    assert list((tmp_path / "secondary").iterdir()) == []


def test_an_expired_reader_sees_every_write_before_the_expiry_at_its_next_read(
    tmp_path: Path,
) -> None:
    """Within the freshness bound (twice the interval) a read may answer from before a write;
    after ``expire`` it may not. CI: a live backfill returned and the API's next read, a few ms
    later, still answered without the backfilled history."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=60_000)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"  # opened: the bound is now two minutes
        db.write({b"b": b"2"})
        assert reader.get(b"b") is None  # within the bound, from before the write
        reader.expire()
        assert reader.get(b"b") == b"2"
        db.write({b"c": b"3"})
        assert reader.get(b"c") is None  # one catch-up per expiry, then the bound again
    finally:
        reader.close()
        db.close()


def _following(reader: SecondaryReader) -> bool:
    return any(t.name == f"weir-follow-{reader.primary.name}" for t in threading.enumerate())


def test_secondary_reader_catches_up_in_the_background_while_read(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"  # opens it, and its thread starts following
        db.write({b"a": b"2"})
        written = time.time()
        # no read in between: only the reader's own thread can have caught up
        wait_until(lambda: reader.caught_up_at > written, 5.0, what="a catch-up in the background")
        assert reader.get(b"a") == b"2"
    finally:
        reader.close()
        db.close()
    wait_until(lambda: not _following(reader), 5.0, what="close to stop the thread")


def test_a_read_after_an_idle_spell_still_sees_writes_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody reads: the thread stops. A read answers from a catch-up that started at most
    twice the interval before it, so once that long has passed since a write, a read sees it:
    with no thread left, by catching up itself."""
    monkeypatch.setattr(secondary, "FOLLOW_IDLE_S", 0.1)
    monkeypatch.setattr(secondary, "FOLLOW_STOP_S", 0.3)
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1" and _following(reader)
        wait_until(lambda: not _following(reader), 5.0, what="the idle reader's thread to stop")
        db.write({b"a": b"2"})
        time.sleep(0.02)  # the promised bound itself: twice catch_up_ms after the write
        assert reader.get(b"a") == b"2"
        assert _following(reader)  # the read started it again
    finally:
        reader.close()
        db.close()


def test_an_idle_reader_follows_slowly_and_reopens_after_a_flush_without_a_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unread for ``FOLLOW_IDLE_S``, the thread goes on at ``IDLE_CATCH_UP_S`` until
    ``FOLLOW_STOP_S``: a flush that deletes the replayed WAL is followed by a reopen in the
    background, not on the next read's path (where it would replay everything written since)."""
    monkeypatch.setattr(secondary, "FOLLOW_IDLE_S", 0.05)
    monkeypatch.setattr(secondary, "IDLE_CATCH_UP_S", 0.1, raising=False)  # new with the pace
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1" and _following(reader)
        time.sleep(0.2)  # idle past FOLLOW_IDLE_S: the thread's slow pace
        assert _following(reader)
        reopened = reader.reopened
        db.write({b"a": b"2"})
        db.flush()  # a new WAL; the one the reader replayed is deleted
        wait_until(lambda: reader.reopened > reopened, 5.0, what="a reopen without a read")
        assert _following(reader)
        assert reader.get(b"a") == b"2"
    finally:
        reader.close()
        db.close()


def test_a_catch_up_with_nothing_written_is_skipped_but_counts(tmp_path: Path) -> None:
    """A look that finds the newest WAL and the MANIFEST as the last catch-up found them skips
    the catch-up, and still counts as one as of its start; a write, a flush, or a flush of a
    job that writes no WAL (its MANIFEST) is caught up at the next look."""
    db = RocksState(tmp_path / "db")
    quiet = RocksState(tmp_path / "nowal", RocksOptions(wal="never"))
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    unlogged = SecondaryReader(tmp_path / "nowal", tmp_path / "secondary2", catch_up_ms=0)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1"  # the open, then a catch-up that replays nothing new
        skipped, before = reader.skipped, time.time()
        assert reader.get(b"a") == b"1" and reader.skipped == skipped + 1
        assert reader.caught_up_at >= before  # as fresh as a catch-up
        db.write({b"a": b"2"})
        assert reader.get(b"a") == b"2" and reader.skipped == skipped + 1
        db.write({b"a": b"3"})
        db.flush()
        assert reader.get(b"a") == b"3"
        quiet.write({b"q": b"1"})
        quiet.flush()
        assert unlogged.get(b"q") == b"1"
        unlogged.get(b"q")
        assert unlogged.skipped >= 1
        quiet.write({b"q": b"2"})
        quiet.flush()  # no WAL written: only the MANIFEST says so
        assert unlogged.get(b"q") == b"2"
    finally:
        reader.close()
        unlogged.close()
        db.close()
        quiet.close()


def test_a_secondary_opens_new_tables_on_its_own_thread(tmp_path: Path) -> None:
    """RocksDB loads the tables of each version a catch-up reads with up to
    ``max_file_opening_threads`` threads, made and joined in every catch-up (RocksDB's default,
    16, cost ~0.4 ms a catch-up, all of it under the GIL: rocksdict does not release it, so the
    API's requests waited): a reader opens its instances with one, as its LOG records."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=0)
    try:
        db.write({b"a": b"1"})
        db.flush()
        assert reader.get(b"a") == b"1"
        (log,) = (tmp_path / "secondary").glob("s*/LOG")
        assert "Options.max_file_opening_threads: 1\n" in log.read_text()
    finally:
        reader.close()
        db.close()


class _SlowCatchUp:
    """A secondary instance whose catch-ups take ``2 * phase_s``: the real catch-up half way."""

    def __init__(self, db: Any, phase_s: float) -> None:
        self._db, self._phase_s = db, phase_s
        self.started = threading.Event()  # set as each catch-up starts
        self.replayed = threading.Event()  # set once a catch-up's real one is done

    def try_catch_up_with_primary(self) -> None:
        self.started.set()
        time.sleep(self._phase_s)  # the slow catch-up itself, what the test is about
        self._db.try_catch_up_with_primary()
        self.replayed.set()
        time.sleep(self._phase_s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def test_a_read_during_a_slow_catch_up_waits_for_it_rather_than_answer_older(
    tmp_path: Path,
) -> None:
    """A catch-up counts once it is done, as of when it started. A write lands just after one
    catch-up replayed; the next starts; a read then must not answer from the first (it once
    did: a catch-up counted from its start, so the read found it fresh and got the old value,
    though the write was 100 ms old)."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    try:
        db.write({b"a": b"1"})
        assert reader.get(b"a") == b"1" and _following(reader)
        with reader._lock:
            slow = _SlowCatchUp(reader._db, 0.1)
            reader._db = slow  # type: ignore[assignment]
        assert slow.replayed.wait(5.0)  # the follower's catch-up replayed, and goes on 100 ms
        slow.started.clear()
        db.write({b"a": b"2"})
        assert slow.started.wait(5.0)  # the next catch-up started; it replays in 100 ms
        assert reader.get(b"a") == b"2"
    finally:
        reader.close()
        db.close()


def test_full_memtables_wait_to_be_flushed_together_into_one_file(tmp_path: Path) -> None:
    """Small memtables keep a put cheap; they are flushed ``memtables_per_flush`` at a time, so
    level-0 files stay as few as one large memtable made (decision 0017), and every value is
    read back meanwhile, whichever memtable holds it."""
    opts = RocksOptions(write_buffer_mb=1, memtables_per_flush=4)
    db = RocksState(tmp_path / "db", opts)
    value = bytes(range(256)) * 4  # 1 KiB: ~2.5 MiB fills two or three memtables, not four
    keys = [layout.state_key(i % 128, 1, b"k%d" % i, 0) for i in range(2_500)]
    try:
        for i in range(0, len(keys), 100):
            db.write({k: value + k for k in keys[i : i + 100]})
        ssts = lambda: sorted((tmp_path / "db").glob("*.sst"))  # noqa: E731
        assert ssts() == []  # full memtables wait for a fourth
        assert db.get(keys[0]) == value + keys[0] and db.get(keys[-1]) == value + keys[-1]
        assert db.get(layout.state_key(0, 1, b"absent", 0)) is None
        db.flush()
        assert len(ssts()) == 1
        assert [k for k, _ in db.scan(keys[0][:2], keys[0][:2] + b"\xff")][:1] == [
            min(k for k in keys if k[:2] == keys[0][:2])
        ]
    finally:
        db.close()


def test_an_unknown_compression_is_refused_with_the_ones_there_are() -> None:
    with pytest.raises(StateError, match="compression 'zip' .* use one of lz4, none, snappy"):
        RocksOptions(compression="zip")


def _in_memtables(db: RocksState) -> int:
    """Entries in ``db``'s memtables, the active one and those waiting to be flushed."""
    return sum(
        db._db.property_int_value(f"rocksdb.num-entries-{m}-mem-table{s}") or 0
        for m, s in (("active", ""), ("imm", "s"))
    )


def test_deletes_past_the_bound_flush_and_a_file_of_deletes_is_compacted_away(
    tmp_path: Path,
) -> None:
    """A streaming job's merges fill the memtables with dead entries that every read steps
    over: past ``garbage_flush_deletes`` deletes they are flushed (a put and its delete in
    one flush both go), and a file that is mostly deletes is compacted until none is left."""
    opts = RocksOptions(garbage_flush_deletes=2_000)
    db = RocksState(tmp_path / "db", opts)
    keep = {layout.state_key(0, 1, b"k%05d" % (50 * i), 0): b"v" for i in range(100)}
    db.write(keep)
    db.flush()  # the live keys in a file below: later deletes cannot simply vanish in a flush
    # between the live keys: their deletes must stay in a flushed file
    dead = [layout.state_key(0, 1, b"k%05d" % i, 0) for i in range(5_000) if i % 50]
    try:
        for i in range(0, 1_900, 100):  # puts and their deletes, below the bound: no flush
            db.write({k: b"x" * 50 for k in dead[i : i + 100]})
            db.write({}, dead[i : i + 100])
        files = lambda: db._db.live_files()  # noqa: E731
        assert len(files()) == 1 and _in_memtables(db) == 2 * 1_900
        for i in range(1_900, 2_000, 100):  # the 2,000th delete: a flush
            db.write({k: b"x" * 50 for k in dead[i : i + 100]})
            db.write({}, dead[i : i + 100])
        # flushed in the background; its file of deletes then compacted with the live one
        wait_until(
            lambda: (
                _in_memtables(db) == 0
                and sum(f["num_deletions"] for f in files()) == 0
                and len(files()) == 1
            ),
            timeout=20,
            what="the deletes flushed and compacted away",
        )
        assert sum(f["num_entries"] for f in files()) == len(keep)
        assert dict(db.scan(b"", b"\xff")) == keep
    finally:
        db.close()


def test_a_bulk_load_without_deletes_is_never_flushed_for_garbage(tmp_path: Path) -> None:
    db = RocksState(tmp_path / "db", RocksOptions(garbage_flush_deletes=10))
    try:
        for i in range(50):
            db.write({layout.state_key(0, 1, b"k%d-%d" % (i, j), 0): b"v" for j in range(100)})
        assert db._db.live_files() == []
    finally:
        db.close()


def test_the_deletes_are_counted_from_the_last_flush_of_any_kind(tmp_path: Path) -> None:
    """A flush, a checkpoint's too, takes the deletes with the memtables: the bound counts
    only those written since, so 1,500 deletes after each of them flush nothing."""
    db = RocksState(tmp_path / "db", RocksOptions(garbage_flush_deletes=2_000))
    in_memory = lambda: db._db.property_int_value("rocksdb.num-entries-active-mem-table")  # noqa: E731

    def put_and_delete(first: int) -> None:
        part = [layout.state_key(0, 1, b"k%05d" % i, 0) for i in range(first, first + 1_500)]
        db.write({k: b"x" for k in part})
        db.write({}, part)

    try:
        put_and_delete(0)
        db.flush()
        put_and_delete(1_500)
        assert in_memory() == 3_000  # not flushed: 1,500 deletes since the flush
        db.checkpoint(tmp_path / "checkpoint")
        put_and_delete(3_000)
        assert in_memory() == 3_000  # nor since the checkpoint's
    finally:
        db.close()


@pytest.mark.parametrize("wal", ["always", "when_read"])
def test_the_bound_grows_with_the_state_only_while_nobody_reads_it(
    tmp_path: Path, wal: str
) -> None:
    """Unread (the WAL off, no reader announced), a garbage flush raises the bound to the
    state's key count: a large state is rewritten by compactions rarely. Read live (the WAL
    on), the bound stays ``garbage_flush_deletes``: lookups step over the dead entries of the
    memtables, and a bound grown with the state let them pile up as the job aged."""
    db = RocksState(tmp_path / "db", RocksOptions(garbage_flush_deletes=2_000, wal=wal))

    def put_and_delete(first: int, n: int) -> None:
        part = [layout.state_key(0, 1, b"d%05d" % i, 0) for i in range(first, first + n)]
        db.write({k: b"x" for k in part})
        db.write({}, part)

    try:
        db.write({layout.state_key(0, 1, b"k%05d" % i, 0): b"v" for i in range(20_000)})
        db.flush()  # a state of 20,000 keys
        put_and_delete(0, 2_000)  # the first garbage flush, read or not
        wait_until(lambda: _in_memtables(db) == 0, timeout=20, what="the first garbage flush")
        put_and_delete(2_000, 2_000)  # 2,000 deletes more
        if wal == "always":
            wait_until(lambda: _in_memtables(db) == 0, timeout=20, what="a second garbage flush")
        else:
            assert db._garbage_bound >= 20_000
            assert _in_memtables(db) == 4_000  # below the grown bound: not flushed
    finally:
        db.close()


def test_a_catch_up_that_raises_stops_the_thread_and_the_next_read_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An ``OSError`` from a reopen (the readers' directory, ``walgate``) ended the following
    thread without clearing its mark, so no read ever started one again: every read then
    waited for its own catch-up. Now it logs why, and the next read follows again."""
    db = RocksState(tmp_path / "db")
    reader = SecondaryReader(tmp_path / "db", tmp_path / "secondary", catch_up_ms=10)
    catch_up = reader._catch_up
    failing = threading.Event()

    def flaky() -> object:
        if failing.is_set() and threading.current_thread().name.startswith("weir-follow-"):
            failing.clear()
            raise PermissionError(13, "Permission denied")
        return catch_up()

    monkeypatch.setattr(reader, "_catch_up", flaky)
    try:
        db.write({b"a": b"1"})
        with caplog.at_level(logging.WARNING, logger=secondary.__name__):
            assert reader.get(b"a") == b"1" and _following(reader)
            failing.set()
            wait_until(lambda: not _following(reader), 5.0, what="the failed thread to stop")
        assert "secondary reopen failed" in caplog.text and "Permission denied" in caplog.text
        assert reader.get(b"a") == b"1"
        assert _following(reader)  # the read started it again
    finally:
        reader.close()
        db.close()
