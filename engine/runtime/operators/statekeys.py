"""The state-key parts an operator writes over and over, cached: a key's prefix (key group |
state id | length-prefixed key) is built once per key and a window's namespace once per end,
not once per record. Both caches are bounded: cleared when full."""

from __future__ import annotations

from typing import cast

from weir.state import layout
from weir.state.keygroups import key_group

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
        window's keys nearly always are), a call each otherwise."""
        found = list(map(self.cache.get, keys))
        if None in found:
            return list(map(self.prefix, keys))
        return cast(list[tuple[int, bytes]], found)


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
