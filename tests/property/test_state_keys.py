"""State keys round-trip, and their byte order is (key group, state, key, window end)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.state import layout

KG = st.integers(0, 32767)
SID = st.integers(0, 0xFFFF)
KEY = st.one_of(st.binary(max_size=64), st.text(max_size=20).map(str.encode))
NS = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300)
@given(KG, SID, KEY, NS)
def test_state_key_round_trip(kg: int, sid: int, key: bytes, ns: int) -> None:
    raw = layout.state_key(kg, sid, key, ns)
    assert layout.decode_state_key(raw) == (kg, sid, key, ns)
    assert raw.startswith(layout.key_prefix(kg, sid, key))
    assert raw.startswith(layout.state_prefix(kg, sid))


@settings(max_examples=300)
@given(KG, SID, KEY, NS, NS)
def test_windows_of_a_key_sort_by_end(kg: int, sid: int, key: bytes, a: int, b: int) -> None:
    ka, kb = layout.state_key(kg, sid, key, a), layout.state_key(kg, sid, key, b)
    assert (ka < kb) == (a < b)
    assert (layout.encode_namespace(a) < layout.encode_namespace(b)) == (a < b)


@settings(max_examples=300)
@given(KG, SID, KEY, KEY, NS)
def test_a_keys_prefix_scan_holds_only_that_key(
    kg: int, sid: int, key: bytes, other: bytes, ns: int
) -> None:
    prefix = layout.key_prefix(kg, sid, key)
    hi = layout.prefix_upper_bound(prefix)
    assert prefix <= layout.state_key(kg, sid, key, ns) < hi
    if other != key:
        assert not prefix <= layout.state_key(kg, sid, other, ns) < hi


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=12), st.binary(max_size=12))
def test_prefix_upper_bound_is_above_every_extension(prefix: bytes, suffix: bytes) -> None:
    if prefix.rstrip(b"\xff") == b"":
        return  # no upper bound exists (tested in unit/test_layout.py)
    hi = layout.prefix_upper_bound(prefix)
    assert prefix + suffix < hi
    assert not hi.startswith(prefix)
    assert len(hi) <= len(prefix)


@settings(max_examples=200)
@given(KG, KG, KG, SID, KEY, NS)
def test_key_group_bounds(first: int, last: int, kg: int, sid: int, key: bytes, ns: int) -> None:
    first, last = min(first, last), max(first, last)
    lo, hi = layout.key_group_bounds(first, last)
    k = layout.state_key(kg, sid, key, ns)
    assert (lo <= k < hi) == (first <= kg <= last)
