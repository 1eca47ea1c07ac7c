"""Listing an operator's keys a page at a time, by seeking: never more than a request's scan
budget of RocksDB positions, whatever the number of keys.

Within one key group and state id, keys sort by length, then bytes (``state.layout``): the keys
that start with a prefix ``p`` are, for each length ``n >= len(p)``, the range that starts at
``n | p``. A listing seeks there, steps from key to key within it (one seek past each key's
windows), and when it leaves the range seeks to the next length that exists. An operator with
panes keeps its keys under two state ids; their orders are merged and a key in both is listed
once. Every seek lands on a position (a key, matching or not), and everything before the last
position taken is done, so a page that spends its budget can end there and the ``cursor``
resumes after it.

Operators whose windows are cells list their keys with ``cellkeys`` instead.
"""

from __future__ import annotations

import base64
import heapq
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from weir.state import layout

SCAN_BUDGET = 10_000  # positions one request may examine
_LEN = struct.Struct(">H")
_CURSOR = struct.Struct(">BBH")  # version, whether a key follows, key group
_VERSION = 1


class Seeker(Protocol):
    """The part of a RocksDB iterator a listing uses (rocksdict's ``RdictIter``)."""

    def seek(self, key: bytes) -> None: ...
    def valid(self) -> bool: ...
    def key(self) -> bytes: ...


class BadCursor(ValueError):
    """A cursor this API did not give out."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a listing is: in ``key_group``, after ``key`` (``None``: at the group's start)."""

    key_group: int
    key: bytes | None

    def encode(self) -> str:
        head = _CURSOR.pack(_VERSION, self.key is not None, self.key_group)
        return base64.urlsafe_b64encode(head + (self.key or b"")).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str, max_parallelism: int) -> Position:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            version, has_key, kg = _CURSOR.unpack_from(raw)
        except (ValueError, struct.error):
            raise BadCursor("it is not base64 of a listing position") from None
        if version != _VERSION or has_key not in (0, 1) or not 0 <= kg < max_parallelism:
            raise BadCursor("it names no position of this job's listing")
        key = raw[_CURSOR.size :]
        if (not has_key and key) or len(key) > layout.MAX_KEY_BYTES:
            raise BadCursor("it names no position of this job's listing")
        return cls(kg, key if has_key else None)


class Cursor(Protocol):
    """A listing position a page hands back (``Position``, or ``cellkeys.CellPosition``)."""

    def encode(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Page:
    keys: list[str]
    next: Cursor | None
    examined: int


def _positions(
    it: Seeker, base: bytes, want: bytes, after: bytes | None, seeks: list[int]
) -> Iterator[tuple[int, bytes, bool]]:
    """``(length, key, matches)`` of the positions one state id's seeks land on, in layout
    order, after ``after``; ``seeks[0]`` counts the seeks."""
    lw = len(want)
    target = (
        base + _LEN.pack(lw) + want
        if after is None
        else layout.prefix_upper_bound(base + _LEN.pack(len(after)) + after)
    )
    while True:
        seeks[0] += 1
        it.seek(target)
        if not it.valid():
            return
        raw = it.key()
        n = _LEN.unpack_from(raw, 4)[0]
        key = raw[6 : 6 + n]
        if key.startswith(want):
            yield n, key, True
            target = layout.prefix_upper_bound(raw[: 6 + n])  # past this key's windows
            continue
        yield n, key, False
        if n < lw:
            target = base + _LEN.pack(lw) + want
        elif key[:lw] < want:
            target = base + _LEN.pack(n) + want
        elif n < layout.MAX_KEY_BYTES:
            target = base + _LEN.pack(n + 1) + want
        else:
            return


def list_keys(
    iterator: Callable[[int, int], Seeker],
    state_ids: list[int],
    max_parallelism: int,
    prefix: bytes,
    start: Position,
    limit: int,
    budget: int = SCAN_BUDGET,
) -> Page:
    """Up to ``limit`` keys starting with ``prefix``, from ``start`` on, examining about
    ``budget`` positions at most; ``iterator(kg, state_id)`` gives an iterator bounded to that
    state's range in that key group. ``Page.next`` is ``None`` once every key group is done."""
    keys: list[str] = []
    seeks = [0]
    after = start.key
    for kg in range(start.key_group, max_parallelism):
        streams = [
            _positions(iterator(kg, sid), layout.state_prefix(kg, sid), prefix, after, seeks)
            for sid in state_ids
        ]
        last: bytes | None = None
        for _, key, matches in heapq.merge(*streams):
            if matches and key != last:
                keys.append(key.decode(errors="replace"))
                last = key
                if len(keys) == limit:
                    return Page(keys, Position(kg, key), seeks[0])
            if seeks[0] >= budget:
                return Page(keys, Position(kg, key), seeks[0])
        after = None
        if seeks[0] >= budget and kg + 1 < max_parallelism:
            return Page(keys, Position(kg + 1, None), seeks[0])
    return Page(keys, None, seeks[0])


__all__ = [
    "SCAN_BUDGET",
    "BadCursor",
    "Cursor",
    "Page",
    "Position",
    "Seeker",
    "list_keys",
]
