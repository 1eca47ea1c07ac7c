"""The state backend contract (``state/backend.py``), one suite run against every backend, as
Flink's ``StateBackendTestBase`` is: RocksDB on real files under tmp_path, and the in-memory
backend the operator unit tests use. What passes here for one passes for the other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.backends import KINDS, Backend, Opened
from weir.base.errors import StateError
from weir.state import layout
from weir.state.keygroups import key_group, range_for_operator

MAX_PAR = 128
ALL = (b"", b"\xff" * 4)  # bounds around every key the tests write (key groups are 2 bytes)


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    opened = Opened(request.param, tmp_path)
    yield opened
    opened.close_all()


@pytest.fixture
def db(backends: Opened) -> Backend:
    return backends.new()


def everything(db: Backend) -> list[tuple[bytes, bytes]]:
    return list(db.scan(*ALL))


def test_put_get_delete(db: Backend) -> None:
    assert db.get(b"k") is None
    db.write({b"k": b"1", b"j": b""})
    assert db.get(b"k") == b"1"
    assert db.get(b"j") == b""  # an empty value is a value, not a miss
    db.write({b"k": b"2"})
    assert db.get(b"k") == b"2"
    db.write({}, [b"k", b"never-written"])  # deleting a missing key is no error
    assert db.get(b"k") is None
    assert everything(db) == [(b"j", b"")]
    db.write({})
    db.write({}, [])
    assert everything(db) == [(b"j", b"")]


def test_write_applies_its_deletes_before_its_puts(db: Backend) -> None:
    db.write({b"a": b"old", b"b": b"old"})
    db.write({b"a": b"new"}, [b"a", b"b"])
    assert everything(db) == [(b"a", b"new")]


def test_a_batch_is_invisible_until_committed_then_applied_in_order(db: Backend) -> None:
    db.write({b"gone": b"x", b"back": b"x"})
    batch = db.batch()
    batch.put(b"k", b"1")
    batch.put(b"k", b"2")  # a later put wins
    batch.put(b"tmp", b"1")
    batch.delete(b"tmp")  # a delete after a put removes the key
    batch.delete(b"gone")
    batch.delete(b"back")
    batch.put(b"back", b"again")  # a put after a delete restores it
    assert everything(db) == [(b"back", b"x"), (b"gone", b"x")]
    db.commit(batch)
    assert everything(db) == [(b"back", b"again"), (b"k", b"2")]


def test_commit_refuses_a_batch_the_backend_did_not_make(db: Backend) -> None:
    class Foreign:
        def put(self, key: bytes, value: bytes) -> None: ...

        def delete(self, key: bytes) -> None: ...

    with pytest.raises(StateError, match=r"got a Foreign; commit a batch made by .*batch\(\)"):
        db.commit(Foreign())


EDGE_KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\x01",
    b"a",
    b"a\x00",
    b"a\xff",
    b"ab",
    b"b",
    b"\x7f",
    b"\x80",
    b"\xfe\xff",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
]


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (b"", b"\xff\xff\xff"),  # everything
        (b"a", b"b"),  # lo inclusive, hi exclusive
        (b"a\x00", b"a\xff"),  # bounds between keys sharing a prefix
        (b"\x00", b"\x01"),  # the 0x00 edge
        (b"\xff", b"\xff\xff\x00"),  # the 0xff edge
        (b"", b"\x00"),  # only the empty key
        (b"\x7f", b"\x80"),  # signed-byte order would put 0x80 first
        (b"a", b"a"),  # empty: lo == hi
        (b"b", b"a"),  # empty: hi < lo
        (b"c", b"d"),  # empty: no key between
    ],
)
def test_scan_yields_lo_to_hi_exclusive_in_byte_order(db: Backend, lo: bytes, hi: bytes) -> None:
    db.write({k: b"v" + k for k in reversed(EDGE_KEYS)})
    want = [(k, b"v" + k) for k in sorted(EDGE_KEYS) if lo <= k < hi]
    assert list(db.scan(lo, hi)) == want


def test_a_scan_reads_the_state_as_of_its_first_step(db: Backend) -> None:
    db.write({b"a": b"1", b"b": b"2", b"c": b"3"})
    rows = db.scan(b"a", b"z")
    assert next(rows) == (b"a", b"1")
    db.write({b"bb": b"new", b"b": b"changed"}, [b"c"])
    assert list(rows) == [(b"b", b"2"), (b"c", b"3")]
    assert list(db.scan(b"a", b"z")) == [(b"a", b"1"), (b"b", b"changed"), (b"bb", b"new")]


def _layout_rows() -> dict[bytes, bytes]:
    """Window rows of two states and cleanup timers for keys over many key groups, with
    negative and positive window ends and key bytes that hold 0x00 and 0xff."""
    keys = [f"user-{i}".encode() for i in range(40)] + [b"\x00", b"\xff", b"a\xff", "ü".encode()]
    rows: dict[bytes, bytes] = {}
    for key in keys:
        kg = key_group(key.decode("utf-8", "replace"), MAX_PAR)
        for sid in (1, 2):
            for end in (-1_000, -1, 0, 1, 1_700_000_000_000):
                rows[layout.state_key(kg, sid, key, end)] = b"%d" % end
        rows[layout.timer_key(kg, 3, 1_000, seq=len(rows))] = key
    return rows


def test_key_group_ranges_split_the_state_with_no_gap_or_overlap(db: Backend) -> None:
    rows = _layout_rows()
    db.write(rows)
    for parallelism in (1, 3, 7):
        parts = []
        for i in range(parallelism):
            kgs = range_for_operator(MAX_PAR, parallelism, i)
            part = list(db.scan(*layout.key_group_bounds(kgs.start, kgs.end)))
            assert all(int.from_bytes(k[:2], "big") in kgs for k, _ in part)
            parts.extend(part)
        assert parts == sorted(rows.items())
    # the top key group's bound is past every 2-byte group
    assert list(db.scan(*layout.key_group_bounds(0, 0xFFFF))) == sorted(rows.items())


def test_prefix_scans_find_one_keys_windows_in_time_order(db: Backend) -> None:
    rows = _layout_rows()
    db.write(rows)
    for key in (b"user-7", b"\x00", b"\xff", b"a\xff"):
        kg = key_group(key.decode("utf-8", "replace"), MAX_PAR)
        prefix = layout.key_prefix(kg, 2, key)
        found = list(db.scan(prefix, layout.prefix_upper_bound(prefix)))
        ends = [layout.decode_state_key(k)[3] for k, _ in found]
        assert ends == [-1_000, -1, 0, 1, 1_700_000_000_000]
        assert all(layout.decode_state_key(k)[:3] == (kg, 2, key) for k, _ in found)


def test_due_timers_are_one_range_per_key_group(db: Backend) -> None:
    kg = 9
    timers = {layout.timer_key(kg, 3, t, s): b"t" for t in (-5, 0, 10, 20) for s in (1, 2)}
    db.write(timers | {layout.timer_key(kg + 1, 3, 0, 1): b"another key group"})
    prefix = layout.state_prefix(kg, 3)
    lo, hi = layout.encode_namespace(-5), layout.encode_namespace(10 + 1)
    due = [layout.decode_timer_key(k)[2:] for k, _ in db.scan(prefix + lo, prefix + hi)]
    assert due == [(-5, 1), (-5, 2), (0, 1), (0, 2), (10, 1), (10, 2)]


def test_restore_gives_exactly_the_checkpointed_state(backends: Opened, tmp_path: Path) -> None:
    db = backends.new()
    db.write({b"a": b"1", b"b": b"2", b"c": b"3"})
    db.write({b"b": b"2b"}, [b"c"])
    snapshot = everything(db)
    db.checkpoint(tmp_path / "chk")
    db.write({b"d": b"4", b"a": b"changed"}, [b"b"])  # after the checkpoint: not in it
    restored = backends.restore(tmp_path / "chk", "restored")
    assert everything(restored) == snapshot == [(b"a", b"1"), (b"b", b"2b")]
    # a restored instance is a backend of its own: its writes reach neither the original nor
    # another instance restored from the same checkpoint
    restored.write({b"r": b"1"}, [b"a"])
    assert everything(db) == [(b"a", b"changed"), (b"d", b"4")]
    assert everything(backends.restore(tmp_path / "chk", "again")) == snapshot


def test_an_empty_backend_restores_empty(backends: Opened, tmp_path: Path) -> None:
    backends.new().checkpoint(tmp_path / "chk")
    assert everything(backends.restore(tmp_path / "chk", "restored")) == []


def test_checkpoint_into_an_existing_directory_is_refused(db: Backend, tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    with pytest.raises(StateError, match=f"checkpoint .*into {re.escape(str(target))} failed"):
        db.checkpoint(target)


def test_reopening_a_closed_backend(backends: Opened) -> None:
    """RocksDB's state outlives the instance; the memory backend's does not (it says so)."""
    db = backends.new("kept")
    db.write({b"k": b"v"})
    db.close()
    again = backends.new("kept")
    assert again.get(b"k") == (b"v" if backends.kind.persists else None)


def test_a_closed_backend_refuses_reads_and_writes(db: Backend) -> None:
    db.write({b"k": b"v"})
    db.close()
    with pytest.raises(StateError, match="closed"):
        db.get(b"k")
    with pytest.raises(StateError, match="closed"):
        db.write({b"k": b"w"})
    with pytest.raises(StateError, match="closed"):
        list(db.scan(*ALL))
    db.close()  # a second close is allowed


def test_memory_is_bytes_by_kind_and_rocksdb_counts_its_memtables(backends: Opened) -> None:
    """What a backend holds outside Python's heap, for the worker's status: RocksDB names its
    memtables, block cache and table readers; the memory backend holds nothing there."""
    db = backends.new()
    before = db.memory()
    assert all(isinstance(v, int) and v >= 0 for v in before.values())
    db.write({b"k%06d" % i: b"v" * 100 for i in range(20_000)})
    after = db.memory()
    if backends.kind.name == "rocksdb":
        assert set(after) == {"memtables", "block_cache", "table_readers"}
        assert after["memtables"] >= before["memtables"] + 20_000 * 100
    else:
        assert after == {}
    db.close()
    assert all(v == 0 for v in db.memory().values())  # a closed instance reports, never fails
