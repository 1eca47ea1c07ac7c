"""The state-key parts an operator writes over and over, cached: a key's prefix (key group |
state id | length-prefixed key) is built once per key and a window's namespace once per end,
not once per record. Both caches are bounded: cleared when full."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, filterfalse, repeat
from operator import is_
from typing import cast

from weir.state import layout
from weir.state.keygroups import key_group, key_groups_of_stored

CACHE_SIZE = 1 << 20


class KeyPrefixes:
    """``prefix(key)`` -> ``(key group, state-key prefix)`` of one operator state. Callers
    keep the bound method (a method call is cheaper than calling an instance)."""

    def __init__(self, state_id: int, max_parallelism: int) -> None:
        self._sid = state_id
        self._max_par = max_parallelism
        self.cache: dict[str, tuple[int, bytes]] = {}

    def prefix(self, key: str) -> tuple[int, bytes]:
        found = self.cache.get(key)
        if found is None:
            if len(self.cache) >= CACHE_SIZE:
                self.cache.clear()
            kg = key_group(key, self._max_par)
            found = self.cache[key] = (kg, layout.key_prefix(kg, self._sid, key.encode()))
        return found

    def many(self, keys: list[str]) -> list[tuple[int, bytes]]:
        """``prefix`` of each of ``keys``: one lookup in C each when all are cached (a fired
        window's keys nearly always are); the others made in one batch."""
        found = list(map(self.cache.get, keys))
        if None in found:
            made = self._make(list(compress(keys, map(is_, found, repeat(None)))))
            found = list(map(made.get, keys, found))
        return cast(list[tuple[int, bytes]], found)

    def warm(self, keys: Iterable[str]) -> None:
        """Cache the prefixes of ``keys`` in one batch now, so whoever asks next (the state
        writer's thread, one key at a time) finds them."""
        missing = list(filterfalse(self.cache.__contains__, keys))
        if missing:
            self._make(missing)

    def _make(self, keys: list[str]) -> dict[str, tuple[int, bytes]]:
        """The prefixes of ``keys`` (none cached), made in one batch and cached."""
        unique = list(dict.fromkeys(keys))
        encoded = list(map(str.encode, unique))
        groups = key_groups_of_stored(encoded, self._max_par)
        prefixes = layout.key_prefixes(groups, self._sid, encoded)
        made = dict(zip(unique, zip(groups, prefixes, strict=True), strict=True))
        if len(self.cache) + len(made) > CACHE_SIZE:
            self.cache.clear()
        self.cache.update(made)
        return made


class Namespaces:
    """``namespace(end)`` -> the namespace bytes of the window ending at ``end``."""

    def __init__(self) -> None:
        self.cache: dict[int, bytes] = {}

    def namespace(self, end: int) -> bytes:
        ns = self.cache.get(end)
        if ns is None:
            if len(self.cache) >= CACHE_SIZE:
                self.cache.clear()
            ns = self.cache[end] = layout.encode_namespace(end)
        return ns
