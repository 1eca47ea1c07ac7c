"""``keylist.list_in_key_order`` over a real RocksDB: keys of many lengths (non-ASCII too) in
many key groups and two state ids, paged with small limits and budgets, come out in the order
of their bytes, each once, exactly the accepted ones, against a brute-force sort."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdict import Options, Rdict

from weir.api import keylist
from weir.state import layout
from weir.state.rocksdb import BoundedIter

M = 16
SIDS = [3, 3 | 0x4000]
KEY_TEXT = st.text(alphabet="ab\xffé\x00z", max_size=6)


def _write(db: Rdict, keys: dict[str, tuple[bool, bool]]) -> None:
    for key, (main, pane) in keys.items():
        raw = key.encode()
        kg = zlib.crc32(raw) % M
        for sid, present in zip(SIDS, (main, pane), strict=True):
            if present:
                for end in (1_000, 2_000):  # two windows: a step must skip both
                    db[layout.state_key(kg, sid, raw, end)] = b"v"


def _pages(db: Rdict, accept: set[bytes], limit: int, budget: int) -> list[list[bytes]]:
    def iterator(kg: int, sid: int) -> keylist.Seeker:
        return BoundedIter(db, layout.prefix_upper_bound(layout.state_prefix(kg, sid)))

    def take(kg: int, key: bytes) -> int | None:
        assert zlib.crc32(key) % M == kg
        return kg if key in accept else None

    pages: list[list[bytes]] = []
    after: bytes | None = None
    for _ in range(10_000):
        page = keylist.list_in_key_order(iterator, SIDS, M, after, limit, take, budget)
        assert all(kg == got for kg, _, got in page.found)
        pages.append([key for _, key, _ in page.found])
        if page.next is None:
            return pages
        assert page.next.key is not None
        back = keylist.Position.decode(page.next.encode(), M)  # the cursor round-trips
        assert back == page.next
        after = back.key
    raise AssertionError("the listing never ended")


@given(
    keys=st.dictionaries(KEY_TEXT, st.sampled_from([(True, False), (False, True), (True, True)])),
    chosen=st.sets(st.integers(0, 40)),
    limit=st.integers(1, 7),
    budget=st.integers(1, 60),
)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_pages_list_accepted_keys_in_byte_order_once(
    tmp_path_factory: pytest.TempPathFactory,
    keys: dict[str, tuple[bool, bool]],
    chosen: set[int],
    limit: int,
    budget: int,
) -> None:
    path: Path = tmp_path_factory.mktemp("order")
    db = Rdict(str(path), Options(raw_mode=True))
    try:
        _write(db, keys)
        ordered = sorted(k.encode() for k in keys)
        accept = {k for i, k in enumerate(ordered) if i in chosen}
        pages = _pages(db, accept, limit, budget)
    finally:
        db.close()
    flat = [key for page in pages for key in page]
    assert flat == [k for k in ordered if k in accept]
    assert all(len(page) <= limit for page in pages)


def test_a_page_always_takes_a_key(tmp_path: Path) -> None:
    """Even when finding the streams' heads spends the whole budget, a page moves on."""
    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    try:
        _write(db, {"k" * n: (True, False) for n in range(1, 30)})
        pages = _pages(db, {b"k" * n for n in range(1, 30)}, limit=100, budget=1)
    finally:
        db.close()
    assert [len(p) for p in pages] == [1] * 29 + [0]  # the last cursor finds nothing after it
