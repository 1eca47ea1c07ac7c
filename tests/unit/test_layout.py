"""The RocksDB key layout: key group | state id | length-prefixed key | namespace."""

from __future__ import annotations

import struct

import pytest

from weir.base.errors import StateError
from weir.state import layout


def test_state_key_bytes_are_exactly_the_documented_layout() -> None:
    raw = layout.state_key(0x0102, 0x0304, b"ab", 5)
    assert raw == (
        b"\x01\x02"  # key group, 2 bytes big-endian
        + b"\x03\x04"  # state id
        + b"\x00\x02"  # key length
        + b"ab"
        + struct.pack(">Q", 5 + (1 << 63))  # namespace, offset-binary big-endian
    )
    assert layout.decode_state_key(raw) == (0x0102, 0x0304, b"ab", 5)


@pytest.mark.parametrize(
    "value", [-(1 << 63), -(1 << 62), -1_000, -1, 0, 1, 999, 1 << 40, (1 << 63) - 1]
)
def test_namespace_round_trip(value: int) -> None:
    raw = layout.encode_namespace(value)
    assert len(raw) == layout.NAMESPACE_BYTES
    assert layout.decode_namespace(raw) == value


def test_namespace_bytes_sort_numerically_across_zero() -> None:
    values = [-(1 << 63), -10_000, -1_001, -1_000, -1, 0, 1, 999, 1_000, (1 << 63) - 1]
    encoded = [layout.encode_namespace(v) for v in values]
    assert sorted(encoded) == encoded
    keys = [layout.state_key(7, 9, b"k", v) for v in reversed(values)]
    assert [layout.decode_state_key(k)[3] for k in sorted(keys)] == values


def test_key_prefix_is_shared_by_all_windows_of_a_key_only() -> None:
    prefix = layout.key_prefix(3, 11, b"ab")
    hi = layout.prefix_upper_bound(prefix)
    mine = [layout.state_key(3, 11, b"ab", ns) for ns in (-5, 0, 10**12)]
    others = [
        layout.state_key(3, 11, b"abc", 0),  # longer key with the same leading bytes
        layout.state_key(3, 11, b"a", 0),
        layout.state_key(3, 12, b"ab", 0),  # another state
        layout.state_key(4, 11, b"ab", 0),  # another key group
    ]
    assert all(prefix <= k < hi for k in mine)
    assert not any(prefix <= k < hi for k in others)


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        (b"ab", b"ac"),
        (b"a\xff", b"b"),
        (b"\x00", b"\x01"),
        (b"\x01\xff\xff", b"\x02"),
        (b"\x00\xfe", b"\x00\xff"),
    ],
)
def test_prefix_upper_bound(prefix: bytes, bound: bytes) -> None:
    assert layout.prefix_upper_bound(prefix) == bound


def test_prefix_upper_bound_of_all_ff_is_an_error() -> None:
    with pytest.raises(ValueError, match="0xff"):
        layout.prefix_upper_bound(b"\xff\xff")


def test_state_prefix_covers_one_state_of_one_key_group() -> None:
    p = layout.state_prefix(9, 4)
    hi = layout.prefix_upper_bound(p)
    assert p <= layout.state_key(9, 4, b"zzz", 123) < hi
    assert not p <= layout.state_key(9, 5, b"a", 0) < hi


def test_key_group_bounds_cover_exactly_the_groups() -> None:
    lo, hi = layout.key_group_bounds(5, 7)
    for kg in range(3, 10):
        k = layout.state_key(kg, 1, b"key", -1)
        assert (lo <= k < hi) == (5 <= kg <= 7)


def test_key_of_65535_bytes_is_allowed_and_longer_is_refused() -> None:
    key = b"k" * layout.MAX_KEY_BYTES
    assert layout.decode_state_key(layout.state_key(0, 1, key, 0))[2] == key
    with pytest.raises(StateError, match="65536 bytes"):
        layout.key_prefix(0, 1, key + b"k")


def test_decode_state_key_refuses_truncated_bytes() -> None:
    raw = layout.state_key(1, 2, b"abc", 42)
    with pytest.raises(StateError, match="malformed state key"):
        layout.decode_state_key(raw[:-1])


def test_key_prefixes_of_many_keys_equal_key_prefix_of_each() -> None:
    keys = [b"", b"ad-1", "é".encode(), b"x" * 300]
    groups = [0, 5, 127, 65535]
    assert layout.key_prefixes(groups, 7, keys) == [
        layout.key_prefix(g, 7, k) for g, k in zip(groups, keys, strict=True)
    ]


def test_key_prefixes_refuse_a_key_too_long_naming_its_length() -> None:
    with pytest.raises(StateError, match="70000 bytes"):
        layout.key_prefixes([1, 2], 3, [b"ok", b"k" * 70_000])
