"""The operators' cache of state-key prefixes: every way of asking gives what the layout and
the key-group function give for one key, cached or not, batched or not, across a full cache."""

from __future__ import annotations

import pytest

from weir.base.errors import StateError
from weir.engine.runtime.operators import statekeys
from weir.engine.runtime.operators.statekeys import KeyPrefixes
from weir.state import layout
from weir.state.keygroups import key_group


def _expected(key: str, sid: int = 3, m: int = 128) -> tuple[int, bytes]:
    g = key_group(key, m)
    return g, layout.key_prefix(g, sid, key.encode())


def test_many_gives_each_keys_prefix_with_hits_misses_and_repeats() -> None:
    prefixes = KeyPrefixes(3, 128)
    assert prefixes.prefix("ad-1") == _expected("ad-1")  # cached now
    keys = ["ad-2", "ad-1", "ad-2", "é", "", "ad-1", "ad-3"]
    assert prefixes.many(keys) == [_expected(k) for k in keys]
    assert set(prefixes.cache) == set(keys)
    assert prefixes.many(keys) == [_expected(k) for k in keys]  # all hits


def test_warm_caches_what_the_writer_will_ask_for(monkeypatch: pytest.MonkeyPatch) -> None:
    prefixes = KeyPrefixes(3, 128)
    prefixes.warm({"a", "b", "c"})
    assert prefixes.cache == {k: _expected(k) for k in "abc"}

    def made_one_at_a_time(key: str, m: int) -> int:
        raise AssertionError(f"{key!r} was not cached")

    monkeypatch.setattr(statekeys, "key_group", made_one_at_a_time)
    assert [prefixes.prefix(k) for k in "cab"] == [_expected(k) for k in "cab"]


def test_a_full_cache_starts_again_and_answers_stay_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(statekeys, "CACHE_SIZE", 4)
    prefixes = KeyPrefixes(3, 128)
    first = [f"k{i}" for i in range(3)]
    assert prefixes.many(first) == [_expected(k) for k in first]
    mixed = ["k0", "n1", "n2", "k1"]  # two hits, two misses past the bound
    assert prefixes.many(mixed) == [_expected(k) for k in mixed]
    assert len(prefixes.cache) <= 4
    prefixes.warm([f"w{i}" for i in range(6)])  # more than the bound at once
    assert prefixes.many(["w5", "k2"]) == [_expected("w5"), _expected("k2")]


def test_a_key_too_long_is_refused_in_a_batch_too() -> None:
    with pytest.raises(StateError, match="longer than the 65535-byte limit"):
        KeyPrefixes(3, 128).many(["fine", "k" * 70_000])
