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

``list_in_key_order`` lists keys in the order of their bytes (their strings' order) across key
groups instead: one stream per key group, state id and key length, merged. It must see the head
of every stream before it can give the first key, so a page costs about two seeks per (key
group, state id, key length) present, plus the positions it examines, which the budget bounds.
"""

from __future__ import annotations

import base64
import heapq
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from weir.state import layout

SCAN_BUDGET = 10_000  # positions one request may examine
_LEN = struct.Struct(">H")
_CURSOR = struct.Struct(">BBH")  # version, whether a key follows, key group
_VERSION = 1
T = TypeVar("T")


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


@dataclass(frozen=True, slots=True)
class Page:
    keys: list[str]
    next: Position | None
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


@dataclass(frozen=True, slots=True)
class OrderedPage(Generic[T]):
    """Keys in bytes order as ``(key_group, key, what accept gave)``; ``next`` resumes after
    the last key examined (``None``: the listing is over)."""

    found: list[tuple[int, bytes, T]]
    next: Position | None
    examined: int


def _first_after(base: bytes, n: int, after: bytes | None) -> bytes:
    """Where the keys of length ``n`` that sort after ``after`` begin."""
    if after is None:
        return base + _LEN.pack(n)
    if n > len(after):  # longer: after iff the first len(after) bytes are >= after
        return base + _LEN.pack(n) + after
    # no longer: after iff greater than after's first n bytes (equal is a prefix: before)
    return layout.prefix_upper_bound(base + _LEN.pack(n) + after[:n])


def _key_at(raw: bytes) -> tuple[int, bytes]:
    n = _LEN.unpack_from(raw, 4)[0]
    return n, raw[6 : 6 + n]


def _heads(it: Seeker, base: bytes, after: bytes | None, seeks: list[int]) -> list[bytes]:
    """The first key after ``after`` of every key length one state id holds in a key group:
    a seek per length present (a landing past ``n`` shows no length between is present)."""
    heads: list[bytes] = []
    n = 0
    while n <= layout.MAX_KEY_BYTES:
        seeks[0] += 1
        it.seek(_first_after(base, n, after))
        if not it.valid():
            break
        m, key = _key_at(it.key())
        if m == n or after is None or key > after:
            heads.append(key)
            n = m + 1
        else:  # a key of length m, but before after: seek again within length m
            n = m
    return heads


def _walk(
    it: Seeker, base: bytes, kg: int, head: bytes, seeks: list[int]
) -> Iterator[tuple[bytes, int]]:
    """``(key, kg)`` from ``head`` on, through the keys of its length, in bytes order."""
    n = len(head)
    key = head
    while True:
        yield key, kg
        seeks[0] += 1
        it.seek(layout.prefix_upper_bound(base + _LEN.pack(n) + key))  # past key's windows
        if not it.valid():
            return
        m, key = _key_at(it.key())
        if m != n:
            return


def list_in_key_order(
    iterator: Callable[[int, int], Seeker],
    state_ids: list[int],
    max_parallelism: int,
    after: bytes | None,
    limit: int,
    accept: Callable[[int, bytes], T | None],
    budget: int = SCAN_BUDGET,
) -> OrderedPage[T]:
    """Up to ``limit`` keys after ``after``, in bytes order across key groups, for which
    ``accept(kg, key)`` gives something (each call counts as a position examined). A page
    returns once it has examined about ``budget`` positions, having taken at least one key."""
    seeks = [0]
    streams: list[Iterator[tuple[bytes, int]]] = []
    for kg in range(max_parallelism):
        for sid in state_ids:
            it, base = iterator(kg, sid), layout.state_prefix(kg, sid)
            streams.extend(_walk(it, base, kg, h, seeks) for h in _heads(it, base, after, seeks))
    found: list[tuple[int, bytes, T]] = []
    last: bytes | None = None
    for key, kg in heapq.merge(*streams):
        if key == last:  # under both state ids of an operator with panes
            continue
        last = key
        seeks[0] += 1
        got = accept(kg, key)
        if got is not None:
            found.append((kg, key, got))
        if len(found) == limit or seeks[0] >= budget:
            return OrderedPage(found, Position(kg, key), seeks[0])
    return OrderedPage(found, None, seeks[0])


__all__ = [
    "SCAN_BUDGET",
    "BadCursor",
    "OrderedPage",
    "Page",
    "Position",
    "Seeker",
    "list_in_key_order",
    "list_keys",
]
