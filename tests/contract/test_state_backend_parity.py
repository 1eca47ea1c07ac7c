"""Parity: Hypothesis runs random sequences of writes, batches, reads, scans (some across a
write) and checkpoint-then-restore against every backend and a plain dict at once; every
result each backend gives must be the dict's."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.contract.backends import KINDS, Backend, Opened

# few distinct bytes, so keys collide, share prefixes and sit on the 0x00, 0x7f/0x80 and 0xff
# edges of byte order; b"" is a key too
KEYS = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x7F, 0x80, 0xFE, 0xFF]), max_size=3).map(bytes)
VALUES = st.binary(max_size=3)
PUTS = st.dictionaries(KEYS, VALUES, max_size=6)
DELETES = st.lists(KEYS, max_size=4)
OPS = st.lists(st.tuples(KEYS, st.none() | VALUES), max_size=8)  # (key, None) is a delete
ALL = (b"", b"\xff" * 4)
RESTORES = 2  # per run: each opens a RocksDB, most of what a step costs when Hypothesis shrinks

# a failure is shrunk for up to Hypothesis's own 300 s limit, then reported
pytestmark = pytest.mark.timeout(600)


class BackendParity(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="weir-parity-"))
        self.opened = [Opened(kind, self.root) for kind in KINDS]
        self.dbs: list[Backend] = [o.new("db0") for o in self.opened]
        self.model: dict[bytes, bytes] = {}
        self.restores = 0

    def _rows(self, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.model.items() if lo <= k < hi)

    @rule(puts=PUTS, deletes=DELETES)
    def write(self, puts: dict[bytes, bytes], deletes: list[bytes]) -> None:
        for db in self.dbs:
            db.write(puts, deletes)
        for k in deletes:
            self.model.pop(k, None)
        self.model.update(puts)

    @rule(ops=OPS)
    def commit_a_batch(self, ops: list[tuple[bytes, bytes | None]]) -> None:
        for db in self.dbs:
            batch = db.batch()
            for k, v in ops:
                if v is None:
                    batch.delete(k)
                else:
                    batch.put(k, v)
            db.commit(batch)
        for k, v in ops:
            if v is None:
                self.model.pop(k, None)
            else:
                self.model[k] = v

    @rule(key=KEYS)
    def get(self, key: bytes) -> None:
        assert [db.get(key) for db in self.dbs] == [self.model.get(key)] * len(self.dbs)

    @rule(lo=KEYS, hi=KEYS)
    def scan(self, lo: bytes, hi: bytes) -> None:
        want = self._rows(lo, hi)
        for db in self.dbs:
            assert list(db.scan(lo, hi)) == want

    @rule(lo=KEYS, hi=KEYS, puts=PUTS, deletes=DELETES)
    def scan_across_a_write(
        self, lo: bytes, hi: bytes, puts: dict[bytes, bytes], deletes: list[bytes]
    ) -> None:
        want = self._rows(lo, hi)
        scans = [db.scan(lo, hi) for db in self.dbs]
        firsts = [next(rows, None) for rows in scans]
        self.write(puts, deletes)
        for first, rows in zip(firsts, scans, strict=True):
            assert ([] if first is None else [first]) + list(rows) == want

    @precondition(lambda self: self.restores < RESTORES)
    @rule()
    def checkpoint_then_restore(self) -> None:
        """Go on with new instances restored from a checkpoint of the current ones."""
        self.restores += 1
        restored = []
        for opened, db in zip(self.opened, self.dbs, strict=True):
            chk = opened.path(f"chk{self.restores}")
            db.checkpoint(chk)
            restored.append(opened.restore(chk, f"db{self.restores}"))
        self.dbs = restored

    @invariant()
    def same_contents(self) -> None:
        want = sorted(self.model.items())
        for db in self.dbs:
            assert list(db.scan(*ALL)) == want

    def teardown(self) -> None:
        for opened in self.opened:
            opened.close_all()
        shutil.rmtree(self.root, ignore_errors=True)


BackendParity.TestCase.settings = settings(max_examples=50, stateful_step_count=15)
TestBackendParity = BackendParity.TestCase
