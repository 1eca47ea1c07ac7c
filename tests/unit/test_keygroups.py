"""Key groups: a stable hash modulo max_parallelism, and Flink's contiguous ranges."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.state.keygroups import (
    MAX_KEY_GROUPS,
    NULL_KEY,
    KeyGroupRange,
    canonical_key,
    key_group,
    key_groups,
    key_value,
    needs_escape,
    operator_for_key_group,
    range_for_operator,
)


@pytest.mark.parametrize(
    ("key", "m", "expected"),
    [
        ("a", 128, 67),  # crc32(b"a") = 3904355907
        ("hello", 128, 6),  # crc32(b"hello") = 907060870
        ("ad-0", 128, 69),
        ("a/b", 128, 28),
        ("ü-ключ", 128, 45),  # UTF-8 bytes are hashed
        ("", 128, 0),
        ("hello", 1, 0),
        ("hello", 1000, 870),
        ("hello", 32768, 907060870 % 32768),
    ],
)
def test_key_group_known_values(key: str, m: int, expected: int) -> None:
    assert key_group(key, m) == expected
    assert key_group(key, m) == zlib.crc32(key.encode("utf-8")) % m


def test_key_groups_batch_form_matches_single() -> None:
    keys = ["a", "hello", "ad-0", "a/b", "ü-ключ", ""]
    assert key_groups(keys, 128) == [key_group(k, 128) for k in keys]


def test_canonical_key_str_and_int() -> None:
    assert canonical_key("ad-1") == "ad-1"
    assert canonical_key(17) == "17"
    assert canonical_key(-5) == "-5"
    assert canonical_key(2**70) == str(2**70)


@pytest.mark.parametrize("bad", [True, 1.5, b"x", ("a",)])
def test_canonical_key_refuses_other_types(bad: object) -> None:
    with pytest.raises(TypeError, match=type(bad).__name__):
        canonical_key(bad)


def test_the_null_key_is_backslash_n_and_the_string_null_is_itself() -> None:
    assert canonical_key(None) == NULL_KEY == "\\N"
    assert canonical_key("null") == "null" and canonical_key("NULL") == "NULL"
    assert key_value(NULL_KEY) is None and key_value("null") == "null"


@pytest.mark.parametrize(
    ("key", "stored"),
    [("\\N", "\\\\N"), ("\\\\N", "\\\\\\N"), ("\\n", "\\n"), ("a\\N", "a\\N"), ("\\", "\\")],
)
def test_a_string_shaped_like_the_null_key_is_shifted_and_comes_back(key: str, stored: str) -> None:
    assert canonical_key(key) == stored != NULL_KEY
    assert key_value(stored) == key


@given(st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["\\N", "\\\\N", "N", "\\"])))
def test_canonical_keys_are_reversible_and_distinct(key: str | None) -> None:
    assert key_value(canonical_key(key)) == key
    assert (canonical_key(key) == NULL_KEY) == (key is None)


@given(st.lists(st.text(alphabet="\\Nab|", max_size=5), min_size=1, max_size=6))
def test_a_batch_without_needs_escape_is_already_canonical(keys: list[str]) -> None:
    if not needs_escape(keys):
        assert [canonical_key(k) for k in keys] == keys


@pytest.mark.parametrize(
    ("m", "p", "ranges"),
    [
        (1, 1, [(0, 0)]),
        (4, 1, [(0, 3)]),
        (4, 2, [(0, 1), (2, 3)]),
        (4, 4, [(0, 0), (1, 1), (2, 2), (3, 3)]),
        (5, 2, [(0, 2), (3, 4)]),
        (10, 3, [(0, 3), (4, 6), (7, 9)]),
        (128, 3, [(0, 42), (43, 85), (86, 127)]),
        (7, 7, [(i, i) for i in range(7)]),
    ],
)
def test_range_for_operator_small_cases(m: int, p: int, ranges: list[tuple[int, int]]) -> None:
    got = [range_for_operator(m, p, i) for i in range(p)]
    assert got == [KeyGroupRange(a, b) for a, b in ranges]
    for i, r in enumerate(got):
        for kg in r:
            assert operator_for_key_group(m, p, kg) == i


def test_key_group_range_value() -> None:
    r = KeyGroupRange(3, 5)
    assert list(r) == [3, 4, 5]
    assert len(r) == 3
    assert 3 in r and 5 in r and 6 not in r and 2 not in r
    assert "3" not in r
    assert r.to_json() == [3, 5]
    empty = KeyGroupRange(4, 3)
    assert len(empty) == 0 and list(empty) == [] and 4 not in empty


@pytest.mark.parametrize(
    ("m", "p", "i", "match"),
    [
        (128, 0, 0, "parallelism=0 must be between 1 and max_parallelism=128"),
        (128, 129, 0, "parallelism=129 must be between 1 and max_parallelism=128"),
        (0, 1, 0, "max_parallelism=0 is out of range"),
        (MAX_KEY_GROUPS + 1, 1, 0, f"max_parallelism={MAX_KEY_GROUPS + 1} is out of range"),
        (128, 4, 4, "worker index 4 is out of range for parallelism 4"),
        (128, 4, -1, "worker index -1 is out of range"),
    ],
)
def test_range_for_operator_rejects_bad_parallelism(m: int, p: int, i: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        range_for_operator(m, p, i)


@given(st.one_of(st.none(), st.integers(), st.text(max_size=6), st.sampled_from(["\\N", "\\\\N"])))
def test_the_clients_path_form_is_the_canonical_key(key: str | int | None) -> None:
    """``weir.client`` builds a key's path itself (it imports no part of the engine)."""
    from weir.api.client._calls import path_key

    assert path_key(key) == canonical_key(key)
